"""A real PDF written byte by byte, so that a test knows exactly which text the file holds.

No PDF library writes it: the objects, the content streams and the cross-reference table are laid
out here (PDF 1.4, the standard Helvetica font, one `Tj` per line), and the text is read back by the
same pypdf that reads a teacher's upload. A page is a list of lines; pypdf gives a page's lines
joined by newlines, and the extractor joins pages with a blank line, so each page is one paragraph.
"""

from __future__ import annotations

__all__ = ["PAGES", "pdf_bytes"]

# The known text of the fixture: a Q/A paragraph, a heading on a page of its own, another Q/A.
PAGES: list[list[str]] = [
    ["Q: Does Ramesh give a discount for coins?",
     "A: Ramesh knocks five rupees off for exact change (nobody has change before noon)."],
    ["# Opening hours"],
    ["Q: When is the stall open?", "A: From seven in the morning until the evening aarti."],
]


def _escape(line: str) -> str:
    return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def pdf_bytes(pages: list[list[str]]) -> bytes:
    """A PDF with one page per item of `pages`, each line drawn on a line of its own."""
    objects: list[bytes] = []

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    pages_id = font + 2 * len(pages) + 1  # after each page's content stream and page object
    kids: list[int] = []
    for lines in pages:
        ops = ["BT", "/F1 12 Tf", "14 TL", "72 720 Td", *(f"({_escape(line)}) Tj T*" for line in lines), "ET"]
        stream = "\n".join(ops).encode("latin-1")
        content = add(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
        kids.append(add(b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                        b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (pages_id, content, font)))
    refs = b" ".join(b"%d 0 R" % kid for kid in kids)
    assert add(b"<< /Type /Pages /Kids [%s] /Count %d >>" % (refs, len(kids))) == pages_id
    catalog = add(b"<< /Type /Catalog /Pages %d 0 R >>" % pages_id)

    out = bytearray(b"%PDF-1.4\n")
    offsets: list[int] = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, catalog, xref)
    return bytes(out)
