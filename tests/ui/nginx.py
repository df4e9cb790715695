"""A real reverse proxy (Debian's nginx) in front of the store under a path prefix, run as the
test's own process with everything under a temporary folder: as Cockpit serves an embedded service
under /api/services/<id>/.

Each site is one server block on its own port:
- "prefix": rewrites nothing but the path prefix; every header passes both ways, a Location too.
- "cockpit": does to requests and responses what Cockpit's embedded-service proxy does (its
  src/lib/server/embedded-services.ts): drops the browser's Authorization, Cookie, Origin, Referer
  and X-Forwarded-For, sets X-Forwarded-Host and -Proto; drops CSP, X-Frame-Options, the
  cross-origin policies and Set-Cookie from responses; in HTML, adds its trailing-slash script to
  <head>; leaves the Location of an HTML response as it is (which it does for every redirect
  marked as HTML). It also serves a "bookmark" page that frames the service, as Cockpit does.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import httpx

from devtools.localpg import free_port

NGINX = os.environ.get("METASTORE_NGINX", shutil.which("nginx") or "/usr/sbin/nginx")
PREFIX = "/api/services/metadata-store/"
PROBE = "/nginx-listens"

# What Cockpit puts at the top of an embedded service's HTML (a request without the trailing
# slash gets it added in the address bar).
SLASH_SCRIPT = (
    "<script>if (location.pathname === '/api/services/metadata-store') "
    "history.replaceState(null, '', '/api/services/metadata-store/' + location.search + location.hash);</script>"
)

BOOKMARK = (
    "<!doctype html><html><head><meta charset=utf-8><title>Cockpit</title></head><body>"
    "<h1>Cockpit</h1><iframe id=panel title='Metadata Store' src='/api/services/metadata-store/' "
    "style='width:900px;height:760px;border:1px solid #999'></iframe></body></html>"
)


@dataclass
class Site:
    name: str
    upstream: str  # https://127.0.0.1:<port> of a store
    port: int = field(default_factory=free_port)

    @property
    def url(self) -> str:
        return f"http://localhost:{self.port}"


def _location(site: Site, ca: Path) -> str:
    common = f"""
            proxy_pass {site.upstream}/;
            proxy_redirect off;
            proxy_ssl_verify on;
            proxy_ssl_trusted_certificate {ca};
            proxy_ssl_name localhost;
            proxy_ssl_server_name on;
            proxy_http_version 1.1;
            proxy_buffering off;
            client_max_body_size 2m;"""
    if site.name != "cockpit":
        return common
    return (
        common
        + f"""
            proxy_set_header Authorization "";
            proxy_set_header Cookie "";
            proxy_set_header Origin "";
            proxy_set_header Referer "";
            proxy_set_header X-Forwarded-For "";
            proxy_set_header X-Forwarded-Host $http_host;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header Accept-Encoding "";
            proxy_hide_header Content-Security-Policy;
            proxy_hide_header Content-Security-Policy-Report-Only;
            proxy_hide_header Cross-Origin-Opener-Policy;
            proxy_hide_header Cross-Origin-Resource-Policy;
            proxy_hide_header X-Frame-Options;
            proxy_hide_header Set-Cookie;
            sub_filter_once on;
            sub_filter '<head>' "<head>{SLASH_SCRIPT}";"""
    )


def config(folder: Path, sites: list[Site], ca: Path) -> str:
    servers = []
    for site in sites:
        bookmark = (
            f"""
        location = /cockpit/bookmark {{
            default_type text/html;
            return 200 "{BOOKMARK}";
        }}"""
            if site.name == "cockpit"
            else ""
        )
        servers.append(
            f"""
    server {{
        listen 127.0.0.1:{site.port};
        server_name localhost;
        location {PREFIX} {{{_location(site, ca)}
        }}{bookmark}
        location / {{
            return 404 "outside the proxied prefix\\n";
        }}
    }}"""
        )
    temp = "\n".join(
        f"    {kind}_temp_path {folder / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return f"""
daemon off;
master_process off;
pid {folder / "nginx.pid"};
error_log {folder / "error.log"} warn;
events {{ worker_connections 256; }}
http {{
    log_format prefix '$server_port $request_method $request_uri $status';
    access_log {folder / "access.log"} prefix;
{temp}
    default_type application/octet-stream;
    {"".join(servers)}
}}
"""


@dataclass
class Nginx:
    process: subprocess.Popen[bytes]
    folder: Path
    sites: dict[str, Site]
    output: BinaryIO

    def requests(self, site: str) -> list[tuple[str, str, int]]:
        """Every request a site got but the start's probes: (method, URI, status)."""
        port = str(self.sites[site].port)
        lines = [line.split() for line in (self.folder / "access.log").read_text().splitlines()]
        return [(m, uri, int(status)) for p, m, uri, status in lines if p == port and uri != PROBE]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)  # graceful: lets the access log flush
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.output.close()


def start(folder: Path, sites: list[Site], ca: Path) -> Nginx:
    if not Path(NGINX).exists():
        raise RuntimeError(f"nginx is needed at {NGINX}: apt-get install nginx (scripts/system-deps.sh)")
    folder.mkdir(parents=True, exist_ok=True)
    conf = folder / "nginx.conf"
    conf.write_text(config(folder, sites, ca))
    log = (folder / "stderr.log").open("wb")
    process = subprocess.Popen(
        [NGINX, "-p", str(folder), "-e", str(folder / "error.log"), "-c", str(conf)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    proxy = Nginx(process, folder, {site.name: site for site in sites}, log)
    deadline = time.monotonic() + 15
    for site in sites:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"nginx exited with {process.returncode}: {(folder / 'error.log').read_text()}")
            try:
                httpx.get(f"{site.url}{PROBE}", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    proxy.stop()
                    raise RuntimeError(f"nginx did not listen on {site.url}") from None
                time.sleep(0.05)
    return proxy
