"""Speed benchmarks, by subject: `engine/` (the engine against CTranslate2 and Hugging Face),
`batching/` (what cutting and mixing batches costs), `serve/` (a live server under load,
served against offline), `adversarial/` (a polite client beside misbehaving ones), `gpu/`
(the same questions on a lent GPU machine). Here: the corpora's text (`data`) and the
random-weight benchmark backbone (`model`) they share."""
