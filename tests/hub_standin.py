"""A local stand-in for the Hugging Face Hub: just the HTTP endpoints huggingface_hub 2.x calls for
`whoami`, `create_repo`, `create_commit`/`upload_folder` and `hf_hub_download`, so upload and download
code is tested through the real client (point it here with HF_ENDPOINT).

    hub = HubStandIn(tmp_path)   # serves on 127.0.0.1, a free port
    env["HF_ENDPOINT"] = hub.endpoint
    ...
    hub.stop()

Uploads: the preupload call answers `"uploadMode": "regular"` for every file, so the client sends the
contents inline (base64) in the commit's ndjson payload and never takes the LFS or Xet path (those are
only for files the server marks "lfs"). Downloads: HEAD/GET of `/{repo}/resolve/{revision}/{file}`
answer with ETag, X-Repo-Commit and Content-Length and no Xet headers, so the client downloads over
plain HTTP. `fail_commits = n` makes the next n commit calls answer 503 (transient failure injection).
Files land in `root/{org}/{name}/`; `requests` logs (method, path) of every call.
"""

import base64
import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit


class HubStandIn:
    def __init__(self, root, user="standin-user"):
        self.root = Path(root)
        self.user = user
        self.repos = {}  # repo_id -> {"commit": sha or None, "files": {path: bytes}}
        self.requests = []
        self.fail_commits = 0
        self.commit_attempts = 0
        self._lock = threading.Lock()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep the test output clean
                pass

            def do_GET(self):
                hub._handle(self, "GET")

            def do_HEAD(self):
                hub._handle(self, "HEAD")

            def do_POST(self):
                hub._handle(self, "POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)

    def files(self, repo_id):
        """The files of `repo_id` as {path: bytes} (empty if the repo does not exist)."""
        return dict(self.repos.get(repo_id, {}).get("files", {}))

    # ---- request handling -------------------------------------------------------------------
    def _handle(self, handler, method):
        path = unquote(urlsplit(handler.path).path)
        with self._lock:
            self.requests.append((method, path))
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        authorized = handler.headers.get("Authorization", "").startswith("Bearer ")
        parts = path.strip("/").split("/")
        try:
            if method == "GET" and path == "/api/whoami-v2":
                if not authorized:
                    return _send(handler, method, 401, {"error": "Invalid credentials"})
                return _send(handler, method, 200, {"type": "user", "name": self.user, "orgs": []})
            if method == "POST" and path == "/api/repos/create":
                return self._create_repo(handler, method, json.loads(body), authorized)
            if method == "POST" and path == "/api/validate-yaml":
                return _send(handler, method, 200, {"errors": [], "warnings": []})
            if method == "POST" and parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "preupload":
                repo_id = "/".join(parts[2:4])
                if repo_id not in self.repos:
                    return _repo_not_found(handler, method)
                files = json.loads(body)["files"]
                answer = [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]
                return _send(handler, method, 200, {"files": answer})
            if method == "POST" and parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "commit":
                return self._commit(handler, method, "/".join(parts[2:4]), body, authorized)
            if method == "GET" and parts[:2] == ["api", "models"] and len(parts) >= 4:
                return self._repo_info(handler, method, "/".join(parts[2:4]))
            if method in ("GET", "HEAD") and len(parts) >= 5 and parts[2] == "resolve":
                return self._resolve(handler, method, "/".join(parts[:2]), parts[3], "/".join(parts[4:]))
            return _send(handler, method, 404, {"error": f"the stand-in has no {method} {path}"})
        except Exception as e:  # a bug in the stand-in shows up as a 500 the test can read
            return _send(handler, method, 500, {"error": f"stand-in: {type(e).__name__}: {e}"})

    def _create_repo(self, handler, method, payload, authorized):
        if not authorized:
            return _send(handler, method, 401, {"error": "Invalid credentials"})
        repo_id = f"{payload.get('organization') or self.user}/{payload['name']}"
        with self._lock:
            if repo_id in self.repos:
                # the real Hub's 409 carries the url too; create_repo(exist_ok=True) reads it
                answer = {"error": "You already created this model repo", "url": f"{self.endpoint}/{repo_id}"}
                return _send(handler, method, 409, answer)
            self.repos[repo_id] = {"commit": None, "files": {}}
        return _send(handler, method, 200, {"url": f"{self.endpoint}/{repo_id}", "name": repo_id})

    def _commit(self, handler, method, repo_id, body, authorized):
        with self._lock:
            self.commit_attempts += 1
            if self.fail_commits > 0:
                self.fail_commits -= 1
                return _send(handler, method, 503, {"error": "stand-in: injected transient failure"})
        if not authorized:
            return _send(handler, method, 401, {"error": "Invalid credentials"})
        if repo_id not in self.repos:
            return _repo_not_found(handler, method)
        added = {}
        for line in body.splitlines():
            item = json.loads(line)
            if item["key"] == "file":
                value = item["value"]
                assert value["encoding"] == "base64", value
                added[value["path"]] = base64.b64decode(value["content"])
            elif item["key"] != "header":  # lfsFile would mean the client took the LFS/Xet path
                return _send(handler, method, 400, {"error": f"stand-in: unsupported commit item {item['key']}"})
        with self._lock:
            repo = self.repos[repo_id]
            repo["files"].update(added)
            repo["commit"] = hashlib.sha1(json.dumps([repo["commit"], sorted(added)]).encode() + body).hexdigest()
            for name, content in added.items():
                target = self.root / repo_id / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
        commit = repo["commit"]
        return _send(handler, method, 200, {"commitUrl": f"{self.endpoint}/{repo_id}/commit/{commit}", "commitOid": commit})

    def _repo_info(self, handler, method, repo_id):
        repo = self.repos.get(repo_id)
        if repo is None:
            return _repo_not_found(handler, method)
        siblings = [{"rfilename": name} for name in sorted(repo["files"])]
        return _send(handler, method, 200, {"id": repo_id, "modelId": repo_id, "sha": repo["commit"], "siblings": siblings})

    def _resolve(self, handler, method, repo_id, revision, filename):
        repo = self.repos.get(repo_id)
        if repo is None:
            return _repo_not_found(handler, method)
        if revision not in ("main", repo["commit"]):
            return _send(handler, method, 404, {"error": "Revision not found"}, {"X-Error-Code": "RevisionNotFound"})
        content = repo["files"].get(filename)
        commit_header = {"X-Repo-Commit": repo["commit"] or "0" * 40}
        if content is None:
            headers = {"X-Error-Code": "EntryNotFound", **commit_header}
            return _send(handler, method, 404, {"error": "Entry not found"}, headers)
        headers = {"ETag": f'"{hashlib.sha256(content).hexdigest()}"', **commit_header}
        return _send_bytes(handler, method, 200, content, "application/octet-stream", headers)


def _repo_not_found(handler, method):
    return _send(handler, method, 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})


def _send(handler, method, status, payload, headers=None):
    _send_bytes(handler, method, status, json.dumps(payload).encode(), "application/json", headers)


def _send_bytes(handler, method, status, content, content_type, headers=None):
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(content)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    if method != "HEAD":
        handler.wfile.write(content)
