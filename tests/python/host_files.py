"""Files on the host a sandboxed cell must not see, and a directory it may
mount: what the sandbox tests of the CLI's server and of `dolsot mcp` share."""
from __future__ import annotations

import pathlib


def make_host_files(tmp_path: pathlib.Path) -> dict[str, pathlib.Path]:
    """`secret`: a host file outside any mount ("host secret\\n"); `data`: a
    directory to mount, holding hello.txt ("hello from the host\\n")."""
    secret = tmp_path / "elsewhere" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("host secret\n")
    data = tmp_path / "data"
    data.mkdir()
    (data / "hello.txt").write_text("hello from the host\n")
    return {"secret": secret, "data": data}
