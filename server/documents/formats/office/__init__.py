"""Office files: Word, PowerPoint, Excel and OpenDocument, zips of XML parts.

package.py reads the zip within bounds, xmlparts.py parses its parts safely, inline.py
turns a paragraph's runs into one HTML segment and back, and one module per XML
vocabulary (wordml, drawingml, xlsx's string items, odf_text) says what its runs are;
docx.py, pptx.py, xlsx.py and opendocument.py say where each format keeps its text.
"""

from server.documents.formats.office.docx import Docx
from server.documents.formats.office.opendocument import Odp, Ods, Odt
from server.documents.formats.office.pptx import Pptx
from server.documents.formats.office.xlsx import Xlsx

OFFICE_FORMATS = (Docx(), Pptx(), Xlsx(), Odt(), Odp(), Ods())

__all__ = ["OFFICE_FORMATS", "Docx", "Odp", "Ods", "Odt", "Pptx", "Xlsx"]
