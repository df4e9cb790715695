"""A directory whose file system can be made to refuse writes, then given room again: a small tmpfs
filled with a ballast file where this machine lets us mount one, else a file-size limit
(RLIMIT_FSIZE) set on the service's process, which makes its writes past the limit fail with
EFBIG (Python ignores SIGXFSZ). Chosen at run time; either way the service's own writes fail as
on a full disk, short writes included.

A service whose spool is on such a disk must send its output through a pipe (`piped_log`): the
file-size limit would also stop it writing its log file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import shutil
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path
from typing import IO


class FillableDisk:
    kind = ""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fill(self, pid: int) -> None:
        """From now on, writes of process pid beyond what fits fail."""
        raise NotImplementedError

    def free(self, pid: int) -> None:
        """Room again."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class Tmpfs(FillableDisk):
    kind = "tmpfs"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.ballast = path / "ballast"

    @classmethod
    def mount(cls, size_kb: int) -> Tmpfs | None:
        path = Path(tempfile.mkdtemp(prefix="metastore-tmpfs-"))
        if os.geteuid() != 0 or not shutil.which("mount"):
            path.rmdir()
            return None
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_kb}k,mode=0755", "tmpfs", str(path)],
            capture_output=True,
            check=False,
        )
        if done.returncode != 0:
            path.rmdir()
            return None
        return cls(path)

    def fill(self, pid: int) -> None:
        fd = os.open(self.ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            block = b"\0" * 4096
            while True:
                try:
                    if os.write(fd, block) < len(block):
                        continue  # the last bytes that fit; the next write says ENOSPC
                except OSError as exc:
                    if exc.errno == errno.ENOSPC:
                        return
                    raise
        finally:
            os.close(fd)

    def free(self, pid: int) -> None:
        self.ballast.unlink(missing_ok=True)

    def close(self) -> None:
        subprocess.run(["umount", "-l", str(self.path)], check=False)
        with contextlib.suppress(OSError):
            self.path.rmdir()


class FileSizeLimit(FillableDisk):
    kind = "file size limit"

    def __init__(self, path: Path, headroom: int = 100) -> None:
        super().__init__(path)
        self.headroom = headroom

    def fill(self, pid: int) -> None:
        # The largest file the service has here, plus a few bytes: its next record is cut short.
        largest = max((p.stat().st_size for p in self.path.rglob("*") if p.is_file()), default=0)
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (largest + self.headroom, resource.RLIM_INFINITY))

    def free(self, pid: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def fillable_disk(size_kb: int = 1200, prefer: str = "tmpfs") -> FillableDisk:
    """A tmpfs of size_kb if mounting works here (and is preferred), else a file-size limit."""
    if prefer == "tmpfs":
        disk = Tmpfs.mount(size_kb)
        if disk is not None:
            return disk
    return FileSizeLimit(Path(tempfile.mkdtemp(prefix=f"metastore-fsize-{uuid.uuid4().hex[:6]}-")))


def piped_log(process: subprocess.Popen[bytes], log: Path) -> threading.Thread:
    """Copies the process's output into log (a pipe is not subject to its file-size limit)."""
    assert process.stdout is not None
    source: IO[bytes] = process.stdout

    def pump() -> None:
        with source, log.open("ab") as out:
            for line in iter(source.readline, b""):
                out.write(line)
                out.flush()

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread
