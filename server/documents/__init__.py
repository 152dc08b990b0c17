"""Whole documents: a file in, the same file translated out.

`formats/` holds one reader/writer module per file format (server/documents/formats/base.py
is the contract every format follows); the endpoint, jobs and the LibreTranslate file form
sit on top and send the segments a reader found through the ordinary translation path.
"""
