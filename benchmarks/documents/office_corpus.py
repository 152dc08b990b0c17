"""Office documents built from the shared corpora, one per format, written by each
format's own library (English sources, in order):

    leaflet.docx   medical test set: headings, a bold phrase and an italic one inside
                   sentences, a table, a header and footer, a comment
    talk.pptx      TED test set: a slide per four lines (a title, bullets with a bold run),
                   speaker notes
    strings.xlsx   software-ui strings in column A, a number and a formula beside them
    report.odt     law test set: headings, styled spans, a footnote per section
    deck.odp       news test set: a text frame per line pair, speaker notes
    catalogue.ods  it test set in cells, with numbers beside them
"""

from __future__ import annotations

import io
from collections.abc import Callable
from xml.sax.saxutils import escape

import docx
import odfdo
import openpyxl
import pptx


def _halves(line: str) -> tuple[str, str, str]:
    """A sentence cut into three: before, a middle phrase (formatted), after."""
    words = line.split(" ")
    if len(words) < 6:
        return line, "", ""
    third = len(words) // 3
    return (" ".join(words[:third]) + " ", " ".join(words[third:2 * third]),
            " " + " ".join(words[2 * third:]))


def leaflet_docx(lines: list[str]) -> bytes:
    document = docx.Document()
    document.sections[0].header.paragraphs[0].text = lines[0]
    document.sections[0].footer.paragraphs[0].text = lines[-1]
    table_lines = lines[1:5]
    for number, line in enumerate(lines[5:]):
        if number % 10 == 0:
            document.add_heading(line[:80], level=2)
            continue
        before, middle, after = _halves(line)
        paragraph = document.add_paragraph(before)
        run = paragraph.add_run(middle)
        run.bold = number % 2 == 0
        run.italic = number % 2 == 1
        paragraph.add_run(after)
        if number == 3 and middle:
            document.add_comment(run, text=lines[4], author="Reviewer")
    table = document.add_table(rows=2, cols=2)
    for cell, line in zip((c for row in table.rows for c in row.cells), table_lines,
                          strict=False):
        cell.text = line
    return _saved(document.save)


def talk_pptx(lines: list[str]) -> bytes:
    presentation = pptx.Presentation()
    for start in range(0, len(lines) - 4, 5):
        slide = presentation.slides.add_slide(presentation.slide_layouts[1])
        slide.shapes.title.text = lines[start][:80]
        frame = slide.placeholders[1].text_frame
        frame.text = lines[start + 1]
        for line in lines[start + 2: start + 4]:
            before, middle, after = _halves(line)
            paragraph = frame.add_paragraph()
            for text, bold in ((before, False), (middle, True), (after, False)):
                if text:
                    run = paragraph.add_run()
                    run.text = text
                    run.font.bold = bold
        slide.notes_slide.notes_text_frame.text = lines[start + 4]
    return _saved(presentation.save)


def strings_xlsx(lines: list[str]) -> bytes:
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Strings"
    for row, line in enumerate(lines, 1):
        sheet.cell(row, 1, line)
        sheet.cell(row, 2, row * 10)
        sheet.cell(row, 3, f"=B{row}*2")
    return _saved(workbook.save)


def report_odt(lines: list[str]) -> bytes:
    document = odfdo.Document("text")
    body = []
    for number, line in enumerate(lines):
        if number % 10 == 0:
            body.append(f'<text:h text:outline-level="2">{escape(line[:80])}</text:h>')
            continue
        before, middle, after = (escape(piece) for piece in _halves(line))
        span = f'<text:span text:style-name="Emphasis">{middle}</text:span>' if middle else ""
        note = ""
        if number % 10 == 5:
            note = (f'<text:note text:id="n{number}" text:note-class="footnote">'
                    f"<text:note-citation>{number}</text:note-citation><text:note-body>"
                    f"<text:p>{escape(lines[number - 1])}</text:p></text:note-body></text:note>")
        body.append(f"<text:p>{before}{span}{after}{note}</text:p>")
    for element in odfdo.Element.from_tag(f"<office:text>{''.join(body)}</office:text>"
                                          ).children:
        document.body.append(element)
    return _saved(document.save)


def deck_odp(lines: list[str]) -> bytes:
    document = odfdo.Document("presentation")
    for number in range(0, len(lines) - 2, 3):
        page = odfdo.DrawPage(f"page{number}", name=f"Slide {number // 3 + 1}")
        page.append(odfdo.Frame.text_frame([odfdo.Paragraph(lines[number]),
                                            odfdo.Paragraph(lines[number + 1])],
                                           size=("24cm", "12cm"), position=("1cm", "1cm")))
        page.append(odfdo.Element.from_tag(
            '<presentation:notes><draw:frame svg:width="16cm" svg:height="10cm" svg:x="2cm" '
            f'svg:y="12cm"><draw:text-box><text:p>{escape(lines[number + 2])}</text:p>'
            "</draw:text-box></draw:frame></presentation:notes>"))
        document.body.append(page)
    return _saved(document.save)


def catalogue_ods(lines: list[str]) -> bytes:
    document = odfdo.Document("spreadsheet")
    table = odfdo.Table("Catalogue", width=2, height=len(lines))
    for row, line in enumerate(lines):
        table.set_value((0, row), line)
        table.set_value((1, row), row + 0.5)
    document.body.append(table)
    return _saved(document.save)


def _saved(save: Callable[[io.BytesIO], object]) -> bytes:
    out = io.BytesIO()
    save(out)
    return out.getvalue()


SOURCES: dict[str, tuple[str, Callable[[list[str]], bytes]]] = {
    "leaflet.docx": ("domains/medical/test.en", leaflet_docx),
    "talk.pptx": ("domains/ted/test.en", talk_pptx),
    "strings.xlsx": ("extra/software-ui/train.en", strings_xlsx),
    "report.odt": ("domains/law/test.en", report_odt),
    "deck.odp": ("extra/news/test.en", deck_odp),
    "catalogue.ods": ("domains/it/test.en", catalogue_ods),
}
