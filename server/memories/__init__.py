"""Translation memories: the pairs a team translated and checked, answered again as they
were (exact matches) and offered beside the machine translation (fuzzy matches).

normalisation.py (what makes two sources the same), index.py (one memory's pairs, exact
and fuzzy lookup), book.py (a direction's memories, kept in step with the registry's
change feed), choice.py (which memories a request uses), document_matches.py (a text's
sentences answered from a memory), target_render.py (a human's target, safely in the
request's context), readers (tmx_reader.py, xliff_reader.py, tsv_reader.py over
xml_safety.py), tmx_writer.py (export), imports.py (import jobs)."""
