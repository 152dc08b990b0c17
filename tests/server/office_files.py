"""Office files for the document tests, written by the formats' own libraries (python-docx,
python-pptx, openpyxl, odfdo) and by LibreOffice and pandoc: formatting inside
sentences, tables, headers and footers, notes, comments, text boxes, slide notes, tracked
changes, alt text, formulas."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import docx
import odfdo
import openpyxl
import pptx
from docx.oxml import parse_xml
from openpyxl.cell.rich_text import CellRichText, TextBlock
from openpyxl.cell.text import InlineFont
from openpyxl.comments import Comment
from pptx.util import Inches

from tests.services import require_program

W_NS = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
INSERTED = "The nurse added this sentence later."
DELETED = "This old sentence was removed."


def word_by_python_docx() -> bytes:
    document = docx.Document()
    document.add_heading("Package leaflet for the patient", level=1)
    paragraph = document.add_paragraph("The patient takes ")
    paragraph.add_run("one small tablet").bold = True
    paragraph.add_run(" every day with a glass of ")
    paragraph.add_run("cold water").italic = True
    paragraph.add_run(" after the meal.")
    document.add_comment(paragraph.runs[1], text="Please check this dose with the doctor.",
                         author="Reviewer")
    # a tracked insertion and deletion, as Word writes them
    changed = document.add_paragraph("Store the medicine in a dry place. ")
    changed._p.append(parse_xml(
        f'<w:ins {W_NS} w:id="90" w:author="Nurse" w:date="2026-01-01T00:00:00Z">'
        f"<w:r><w:t>{INSERTED}</w:t></w:r></w:ins>"))
    changed._p.append(parse_xml(
        f'<w:del {W_NS} w:id="91" w:author="Nurse" w:date="2026-01-01T00:00:00Z">'
        f"<w:r><w:delText>{DELETED}</w:delText></w:r></w:del>"))
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "Keep out of the reach of children."
    table.cell(0, 1).text = "Do not use after the expiry date."
    table.cell(1, 0).text = "Ask your doctor for advice."
    table.cell(1, 1).text = "25"
    section = document.sections[0]
    section.header.paragraphs[0].text = "Read all of this leaflet carefully."
    section.footer.paragraphs[0].text = "Printed for the local hospital pharmacy."
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def slides_by_python_pptx() -> bytes:
    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[1])
    slide.shapes.title.text = "Quarterly results of the team"
    body = slide.placeholders[1].text_frame
    body.text = "Sales grew in every region this year."
    paragraph = body.add_paragraph()
    first = paragraph.add_run()
    first.text = "The new product was "
    bold = paragraph.add_run()
    bold.text = "very popular"
    bold.font.bold = True
    last = paragraph.add_run()
    last.text = " with young customers."
    box = slide.shapes.add_textbox(Inches(1), Inches(5), Inches(6), Inches(1))
    box.text_frame.text = "This text box shows the main message."
    box._element.nvSpPr.cNvPr.set("descr", "A box with the main message of the slide")
    table = slide.shapes.add_table(2, 2, Inches(1), Inches(6), Inches(6), Inches(1)).table
    table.cell(0, 0).text = "The first quarter was slow."
    table.cell(1, 1).text = "The last quarter was strong."
    slide.notes_slide.notes_text_frame.text = "Remember to thank the sales team warmly."
    out = io.BytesIO()
    presentation.save(out)
    return out.getvalue()


def workbook_by_openpyxl() -> bytes:
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Products"
    sheet["A1"] = "The red chair is made of wood."
    sheet["A2"] = CellRichText(["The table is ", TextBlock(InlineFont(b=True), "very heavy"),
                                " and strong."])
    sheet["A3"] = "Delivery takes three working days."
    sheet["B1"] = 42
    sheet["B2"] = '=CONCATENATE("Total ", "price")'
    sheet["A1"].comment = Comment("Check the colour with the supplier.", "Buyer")
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


_ODT_BODY = (
    '<text:h text:outline-level="1">A short report about the garden</text:h>'
    '<text:p>The garden has <text:span text:style-name="Strong">many old trees</text:span> '
    'and a <text:a xlink:href="https://example.org/pond" xlink:type="simple">small pond'
    '</text:a> near the house.<text:note text:id="n1" text:note-class="footnote">'
    "<text:note-citation>1</text:note-citation><text:note-body><text:p>The pond was built "
    "in the last century.</text:p></text:note-body></text:note></text:p>"
    "<text:p>Birds visit the garden<office:annotation><dc:creator>Ann</dc:creator>"
    "<text:p>Which birds come most often?</text:p></office:annotation> every morning."
    "</text:p>"
    '<text:p><draw:frame draw:name="Box" text:anchor-type="as-char" svg:width="6cm" '
    'svg:height="2cm"><draw:text-box><text:p>The text box tells the story of the house.'
    "</text:p></draw:text-box><svg:title>A drawing of the old house</svg:title></draw:frame>"
    "</text:p>")


def text_by_odfdo() -> bytes:
    document = odfdo.Document("text")
    for element in odfdo.Element.from_tag(f"<office:text>{_ODT_BODY}</office:text>").children:
        document.body.append(element)
    table = odfdo.Table("Facts", width=2, height=1)
    table.set_value((0, 0), "The house has four rooms.")
    table.set_value((1, 0), 1900)
    document.body.append(table)
    return _saved(document)


def slides_by_odfdo() -> bytes:
    document = odfdo.Document("presentation")
    page = odfdo.DrawPage("page1", name="First")
    page.append(odfdo.Frame.text_frame("The city opens a new library next year.",
                                       size=("20cm", "3cm"), position=("1cm", "1cm")))
    page.append(odfdo.Element.from_tag(
        '<presentation:notes><draw:frame svg:width="16cm" svg:height="10cm" svg:x="2cm" '
        'svg:y="12cm"><draw:text-box><text:p>Speak slowly when you present this slide.'
        "</text:p></draw:text-box></draw:frame></presentation:notes>"))
    document.body.append(page)
    return _saved(document)


def sheet_by_odfdo() -> bytes:
    document = odfdo.Document("spreadsheet")
    table = odfdo.Table("Prices", width=2, height=3)
    table.set_value((0, 0), "The blue lamp is sold out.")
    table.set_value((1, 0), 19.5)
    table.set_value((0, 1), "New stock arrives next week.")
    table.set_cell((1, 1), odfdo.Cell(value="Total price", formula='of:=CONCATENATE("Total ";'
                                                                   '"price")'))
    document.body.append(table)
    return _saved(document)


def _saved(document: odfdo.Document) -> bytes:
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def converted(data: bytes, suffix: str, target: str, tmp_path: Path) -> bytes:
    """The file as LibreOffice writes it in another format (`target`: docx, odt, ...)."""
    work = tmp_path / f"convert-{suffix.strip('.')}-{target}"
    work.mkdir()
    source = work / f"source{suffix}"
    source.write_bytes(data)
    soffice = require_program("soffice")
    subprocess.run([soffice, f"-env:UserInstallation=file://{work / 'profile'}", "--headless",
                    "--convert-to", target, "--outdir", str(work / "out"), str(source)],
                   check=True, capture_output=True, timeout=240)
    return (work / "out" / f"source.{target}").read_bytes()


PANDOC_MARKDOWN = """# Instructions for the new printer

Press the **green button** on the left side to start the printer.[^1]

| Step | What to do |
|------|------------|
| One | Open the paper tray carefully. |
| Two | Put the paper in the tray. |

Read the [online manual](https://example.org/manual) for more help.

[^1]: The button glows when the printer is ready.
"""


def by_pandoc(target: str, tmp_path: Path) -> bytes:
    """PANDOC_MARKDOWN as pandoc writes it (`target`: docx, odt, pptx)."""
    pandoc = require_program("pandoc")
    out = tmp_path / f"pandoc.{target}"
    subprocess.run([pandoc, "-f", "markdown", "-o", str(out)], input=PANDOC_MARKDOWN.encode(),
                   check=True, capture_output=True, timeout=120)
    return out.read_bytes()
