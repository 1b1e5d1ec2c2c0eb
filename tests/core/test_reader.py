"""What the log reader refuses: pictures, archives and binaries passed as a log."""

from __future__ import annotations

from tfdoctor.core.diagnose.reader import not_text


def test_not_text_tells_pictures_archives_and_binaries_from_logs() -> None:
    assert not_text(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR") == "a PNG image"
    assert not_text(b"\xff\xd8\xff\xe0\x00\x10JFIF") == "a JPEG image"
    assert not_text(b"%PDF-1.7\n") == "a PDF document"
    assert not_text(b"\x7fELF\x02\x01\x01" + b"\x00" * 64) == "a program (ELF)"
    assert not_text(bytes(range(256)) * 4) == "binary data"
    # logs: UTF-8, Latin-1, UTF-16 with and without a BOM, a few stray control bytes
    line = "2024-01-02 12:00:00 W tensorflow: OOM when allocating tensor with shape[64]\n"
    assert not_text(line.encode() * 20) is None
    assert not_text("Gerät: Fehler\n".encode("latin-1") * 20) is None
    assert not_text(line.encode("utf-16") * 5) is None
    assert not_text(line.encode("utf-16-le") * 5) is None
    assert not_text(line.encode() * 10 + b"\x00\x1b[31mKilled\x1b[0m\n") is None
    assert not_text(b"") is None
