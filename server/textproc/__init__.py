"""Text in, text out, markup intact: what happens to a text around the engine.

A text (plain or HTML) becomes a `Document` (document.py): verbatim chunks (block tags,
layout, untranslated elements) and sentence units made of parts (parts.py): text to
translate, spans kept verbatim (placeholders, entities, inline void tags), inline tag pairs
and glossary terms. Each unit is masked into a string the engine copies markers through
(masking.py); after translation the markers are restored, and a unit whose markers did
not survive is translated again run by run, so every span comes back. The model's own text
is escaped for where it lands (escaping.py), so in HTML it never becomes markup; an HTML
document's `alt`, `title`, ... values are units of their own, written into their tags'
slots when the document renders. No torch here.
"""
