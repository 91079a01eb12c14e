"""From an uploaded file to chunks, exactly as seed 004 §3 says.

1. Extract the text: `.txt` and `.md` as UTF-8, `.docx` through python-docx (paragraphs, headings
   and table rows; an empty paragraph is a blank line), `.pdf` through pypdf (page by page).
2. Split on blank lines, so that a question and its answer written on consecutive lines stay in
   one chunk. A Markdown heading on a paragraph of its own is not a chunk: it becomes the
   `section` of the chunks under it (and a card's title). A heading with nothing under it (the
   next paragraph is a heading too, or the text ends) is kept as a chunk, so no word is lost.
3. A chunk over `MAX_CHARS` (1,000) characters is split on single newlines, recursively: lines are
   packed into segments of at most `MAX_CHARS`, and a line that is itself too long is split at
   sentence ends, then at spaces. Neighbouring segments of one paragraph overlap by about
   `OVERLAP_CHARS` (100, i.e. 10%): each segment after the first begins with the last words of the
   one before. Paragraphs are natural boundaries and do not overlap each other.
4. Each chunk's id is a UUID derived from its text (and, for a text that occurs more than once in
   the file, from its occurrence), so the same file ingested twice gives the same ids and a
   report's citations stay valid.

Pure: bytes in, chunks out. Limits on size and type are checked here too, so every caller (the
HTTP upload, a scenario pack's knowledge files) refuses the same things in the same words.
"""

from __future__ import annotations

import io
import re
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import PurePath

from schemas.knowledge import Chunk, ChunkMeta

__all__ = [
    "EXTENSIONS",
    "MAX_CHARS",
    "MAX_FILE_BYTES",
    "OVERLAP_CHARS",
    "IngestError",
    "chunk_id",
    "chunk_text",
    "extract_text",
    "split_segments",
]

MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_CHARS = 1000
OVERLAP_CHARS = 100
EXTENSIONS = (".txt", ".md", ".docx", ".pdf")

# uuid5 namespace for chunk ids: fixed forever, or every citation ever stored breaks.
_CHUNK_NAMESPACE = uuid.UUID("6f1c7b52-3d0e-5a8f-9b4d-2c6e8a1f0d37")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")
_SENTENCE_END = re.compile(r"(?<=[.!?।])\s+")


class IngestError(ValueError):
    """A file that cannot become a playbook. `reason` is a stable code for the error body."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def extract_text(filename: str, data: bytes) -> str:
    """The plain text of an uploaded file, or `IngestError` naming why not."""
    suffix = PurePath(filename).suffix.lower()
    if suffix not in EXTENSIONS:
        raise IngestError(
            "unsupported_type", f"{filename!r}: only {', '.join(EXTENSIONS)} files can be ingested"
        )
    if len(data) > MAX_FILE_BYTES:
        raise IngestError(
            "too_large", f"{filename!r} is {len(data)} bytes; the limit is {MAX_FILE_BYTES}"
        )
    if suffix in (".txt", ".md"):
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise IngestError("unreadable", f"{filename!r} is not UTF-8 text: {exc}") from None
    try:
        return _docx_text(data) if suffix == ".docx" else _pdf_text(data)
    except IngestError:
        raise
    except Exception as exc:  # a corrupt document raises whatever its parser raises
        raise IngestError("unreadable", f"{filename!r} could not be read: {exc}") from None


def _docx_text(data: bytes) -> str:
    import docx  # python-docx: imported on first use, it pulls in lxml

    document = docx.Document(io.BytesIO(data))
    lines: list[str] = []
    for paragraph in document.paragraphs:
        text = paragraph.text.strip()
        style = (paragraph.style.name if paragraph.style is not None else "") or ""
        if text and style.lower().startswith(("heading", "title")):
            lines.extend(["", f"# {text}", ""])
        else:
            lines.append(text)
    for table in document.tables:
        lines.append("")
        for row in table.rows:
            lines.append(" | ".join(cell.text.strip() for cell in row.cells))
    return "\n".join(lines)


def _pdf_text(data: bytes) -> str:
    import pypdf

    reader = pypdf.PdfReader(io.BytesIO(data))
    return "\n\n".join((page.extract_text() or "").strip() for page in reader.pages)


def _packed(pieces: list[str], joiner: str, limit: int) -> Iterator[str]:
    """Greedily join `pieces` into runs of at most `limit` characters (a longer piece on its own)."""
    run = ""
    for piece in pieces:
        candidate = f"{run}{joiner}{piece}" if run else piece
        if len(candidate) <= limit or not run:
            run = candidate
        else:
            yield run
            run = piece
    if run:
        yield run


def _split_long(text: str, limit: int) -> list[str]:
    """Pieces of at most `limit` characters: on newlines, then sentence ends, then spaces."""
    if len(text) <= limit:
        return [text]
    for pattern, joiner in ((re.compile(r"\n"), "\n"), (_SENTENCE_END, " "), (re.compile(r"\s+"), " ")):
        parts = [p.strip() for p in pattern.split(text) if p.strip()]
        if len(parts) > 1:
            out: list[str] = []
            for run in _packed(parts, joiner, limit):
                out.extend(_split_long(run, limit))
            return out
    return [text[i : i + limit] for i in range(0, len(text), limit)]


def _tail(text: str, size: int) -> str:
    """About the last `size` characters of `text`, starting at a word."""
    if len(text) <= size:
        return text
    tail = text[-size:]
    space = tail.find(" ")
    return tail[space + 1 :] if 0 <= space < len(tail) - 1 else tail


def split_segments(paragraph: str, limit: int = MAX_CHARS, overlap: int = OVERLAP_CHARS) -> list[str]:
    """One paragraph as segments of at most `limit` characters, neighbours overlapping by ~`overlap`."""
    if len(paragraph) <= limit:
        return [paragraph]
    pieces = _split_long(paragraph, limit - overlap - 1)
    segments = [pieces[0]]
    for piece in pieces[1:]:
        segments.append(f"{_tail(segments[-1], overlap)} {piece}")
    return segments


def chunk_id(text: str, occurrence: int = 0) -> str:
    """The stable id of a chunk: a UUID from its text and which occurrence of that text it is."""
    return str(uuid.uuid5(_CHUNK_NAMESPACE, f"{occurrence}\x00{text}"))


def chunk_text(
    text: str, source_file: str, ingested_at: str, *, playbook_version: str = ""
) -> tuple[Chunk, ...]:
    """The chunks of a document's text, in document order, with their metadata."""
    normal = text.replace("\r\n", "\n").replace("\r", "\n")
    seen: Counter[str] = Counter()
    chunks: list[Chunk] = []
    section = ""
    bare: str | None = None  # the last heading, while nothing has come under it

    def add(paragraph: str) -> None:
        for segment in split_segments(paragraph):
            meta = ChunkMeta(
                source_file=source_file,
                ingested_at=ingested_at,
                section=section,
                playbook_version=playbook_version,
            )
            chunks.append(Chunk(chunk_id=chunk_id(segment, seen[segment]), text_content=segment, metadata=meta))
            seen[segment] += 1

    for paragraph in re.split(r"\n[ \t]*\n", normal):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        heading = _HEADING.match(paragraph)
        if heading and "\n" not in paragraph:
            if bare is not None:
                add(bare)
            section, bare = heading.group(1).strip(), paragraph
            continue
        bare = None
        add(paragraph)
    if bare is not None:
        add(bare)
    return tuple(chunks)
