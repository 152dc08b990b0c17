"""Office files that must be refused with a message that says what is wrong: zip bombs,
XML bombs, external entities, encrypted and corrupt packages, a file of another type."""

from __future__ import annotations

import io
import zipfile

import pytest
from lxml import etree
from office_files import slides_by_python_pptx, text_by_odfdo, word_by_python_docx

from server.documents import formats
from server.documents.formats.base import DocumentError, DocumentTooLarge, ReadOptions
from server.documents.formats.office.package import MAX_RATIO

MANIFEST = "{urn:oasis:names:tc:opendocument:xmlns:manifest:1.0}"
OPTIONS = ReadOptions(source="en", target="fr")
BILLION_LAUGHS = (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
                  + b"".join(b'<!ENTITY lol%d "%s">' % (i, (b"&lol%d;" % (i - 1)) * 10
                                                        if i > 1 else b"&lol;" * 10)
                             for i in range(1, 10))
                  + b']><w:document xmlns:w="http://schemas.openxmlformats.org/'
                    b'wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>&lol9;</w:t>'
                    b"</w:r></w:p></w:body></w:document>")
EXTERNAL_ENTITY = (b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
                   b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/'
                   b'2006/main"><w:body><w:p><w:r><w:t>&x;</w:t></w:r></w:p></w:body>'
                   b"</w:document>")


def _replaced(data: bytes, name: str, body: bytes, *, flag_bits: int = 0) -> bytes:
    """The package with one entry's bytes replaced (deflated)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            content = body if info.filename == name else source.read(info)
            copy = zipfile.ZipInfo(info.filename, date_time=info.date_time)
            copy.compress_type = zipfile.ZIP_DEFLATED
            target.writestr(copy, content)
    raw = out.getvalue()
    if flag_bits:  # the zip's own encryption flag, in the local and central headers
        raw = raw.replace(b"PK\x03\x04\x14\x00\x00\x00", b"PK\x03\x04\x14\x00\x01\x00")
        raw = raw.replace(b"PK\x01\x02\x14\x03\x14\x00\x00\x00",
                          b"PK\x01\x02\x14\x03\x14\x00\x01\x00")
    return raw


def _refusal(fmt: str, data: bytes, options: ReadOptions = OPTIONS) -> DocumentError:
    with pytest.raises(DocumentError) as caught:
        formats.by_name(fmt).read(data, options)
    return caught.value


def test_zip_bomb_refused_by_ratio_while_inflating() -> None:
    bomb = _replaced(word_by_python_docx(), "word/document.xml", b" " * (64 << 20))
    error = _refusal("docx", bomb)
    assert "zip bomb" in str(error) and f"{MAX_RATIO} times" in str(error)
    assert error.status_code == 422


def test_package_over_the_expanded_size_refused() -> None:
    error = _refusal("docx", word_by_python_docx(),
                     ReadOptions(source="en", target="fr", max_expanded_bytes=20_000))
    assert isinstance(error, DocumentTooLarge) and error.status_code == 413
    assert "MiB when unzipped" in str(error)


@pytest.mark.parametrize("body", [BILLION_LAUGHS, EXTERNAL_ENTITY],
                         ids=["billion-laughs", "external-entity"])
def test_dtd_and_entities_refused(body: bytes) -> None:
    error = _refusal("docx", _replaced(word_by_python_docx(), "word/document.xml", body))
    assert "DTD" in str(error) and "word/document.xml" in str(error)
    assert "root:" not in str(error)  # nothing of /etc/passwd was read


def test_ole_compound_file_refused_as_encrypted() -> None:
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 4096
    assert "password-protected" in str(_refusal("docx", ole))


def test_zip_encryption_flag_refused() -> None:
    encrypted = _replaced(word_by_python_docx(), "", b"", flag_bits=1)
    assert "encrypted" in str(_refusal("docx", encrypted))


def test_encrypted_opendocument_refused() -> None:
    data = text_by_odfdo()
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        manifest = etree.fromstring(archive.read("META-INF/manifest.xml"))
    entry = next(e for e in manifest.iter(MANIFEST + "file-entry")
                 if e.get(MANIFEST + "full-path") == "content.xml")
    etree.SubElement(entry, MANIFEST + "encryption-data",
                     {MANIFEST + "checksum-type": "SHA1/1K", MANIFEST + "checksum": "AA=="})
    encrypted = _replaced(data, "META-INF/manifest.xml", etree.tostring(manifest))
    assert "password-protected" in str(_refusal("odt", encrypted))


@pytest.mark.parametrize("cut", [0.5, 0.9])
def test_truncated_package_refused(cut: float) -> None:
    data = word_by_python_docx()
    assert "not a readable" in str(_refusal("docx", data[: int(len(data) * cut)]))


def test_corrupt_entry_refused() -> None:
    data = bytearray(word_by_python_docx())
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as archive:
        info = archive.getinfo("word/document.xml")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra) + 10
    data[start: start + 40] = bytes(40)  # inside the deflated stream
    error = _refusal("docx", bytes(data))
    assert "corrupt" in str(error) and "word/document.xml" in str(error)


def test_malformed_xml_part_refused() -> None:
    broken = _replaced(word_by_python_docx(), "word/document.xml", b"<w:document><w:body>")
    assert "not well-formed" in str(_refusal("docx", broken))


def test_another_office_type_refused() -> None:
    error = _refusal("docx", slides_by_python_pptx())
    assert "not a Word document (.docx)" in str(error)
    assert "mimetype" in str(_refusal("odp", text_by_odfdo()))


def test_not_a_zip_refused() -> None:
    assert "not a zip archive" in str(_refusal("xlsx", b"name,price\nchair,12\n"))
