"""Copy named files out of a downloaded wheel or source archive (launch/setup.sh).

Usage: ``python launch/unpack.py ARCHIVE FOLDER MEMBER=NAME [MEMBER=NAME ...]``. ``ARCHIVE`` is a
wheel or zip (``.whl``, ``.zip``) or a tarball (``.tar.gz``); each ``MEMBER`` (its path inside the
archive) is written to ``FOLDER/NAME`` (subfolders made), through a temporary file renamed into
place, so an interrupted run leaves no half file. Nothing else of the archive is extracted or run.
Exit status 1 with a message naming the member when one is missing.
"""

from __future__ import annotations

import shutil
import sys
import tarfile
import zipfile
from contextlib import ExitStack
from pathlib import Path
from typing import IO


def open_member(stack: ExitStack, archive: Path, member: str) -> IO[bytes]:
    """A readable stream of ``member`` inside ``archive``.

    Raises:
        KeyError: the archive has no such member.
    """
    if archive.suffix in (".whl", ".zip"):
        return stack.enter_context(stack.enter_context(zipfile.ZipFile(archive)).open(member))
    tar = stack.enter_context(tarfile.open(archive))
    stream = tar.extractfile(member)  # raises KeyError when absent
    if stream is None:
        raise KeyError(f"{member} is not a regular file")
    return stack.enter_context(stream)


def unpack(archive: Path, folder: Path, members: dict[str, str]) -> list[Path]:
    """Write each ``member`` of ``archive`` to ``folder / name``; returns the paths written.

    Raises:
        KeyError: a member is missing from the archive.
    """
    written = []
    for member, name in members.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".part")
        with ExitStack() as stack:
            source = open_member(stack, archive, member)
            with partial.open("wb") as out:
                shutil.copyfileobj(source, out)
        partial.replace(target)
        written.append(target)
    return written


def main(argv: list[str]) -> int:
    """The command line (see the module docstring)."""
    if len(argv) < 3 or not all("=" in a for a in argv[2:]):
        print(__doc__, file=sys.stderr)
        return 2
    members = dict(a.split("=", 1) for a in argv[2:])
    try:
        unpack(Path(argv[0]), Path(argv[1]), members)
    except KeyError as e:
        print(f"unpack: {argv[0]}: {e.args[0]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
