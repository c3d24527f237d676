"""A stateful emulator of the Grafana HTTP API parts crashreg's provisioning uses.

Served over real HTTP on 127.0.0.1 (ephemeral port, background thread) so the real
`grafana-client` library talks to it. Behaviour follows Grafana 11's documented API and
its source (pkg/services/dashboards, pkg/api): dashboard versions increment on every save,
412 `version-mismatch` / `name-exists` without `overwrite`, 409 on duplicate data source
name or uid, write-only `secureJsonData` (only `secureJsonFields` is ever returned),
folder versions with 412 on mismatch, search, annotations with tag and time filters, and
401 for anything but a known service-account token.

The alerting provisioning API (/api/v1/provisioning, pkg/services/ngalert/api/api_provisioning.go
and provisioning/alert_rules.go) is `AlertingProvisioning` below.
"""

from __future__ import annotations

import copy
import json
import re
import secrets
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.http import SERVER_POLL_S

GRAFANA_VERSION = "11.3.1"
UID_PATTERN = re.compile(r"^[a-zA-Z0-9\-_]*$")
WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


@dataclass
class Answer:
    """A handler's answer with a status other than 200; `body` None sends no body (204)."""

    status: int
    body: Any = None


class ApiError(Exception):
    """An HTTP error answer with Grafana's JSON body."""

    def __init__(self, http_status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.body = {"message": message, **extra}


def _now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _now_ms() -> int:
    return int(datetime.now(UTC).timestamp() * 1000)


def slugify(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "dashboard"


def _new_uid() -> str:
    return secrets.token_urlsafe(10)[:14].replace("-", "a").replace("_", "b")


def _check_uid(uid: str) -> None:
    if len(uid) > 40:
        raise ApiError(400, "uid too long, max 40 characters")
    if not UID_PATTERN.match(uid):
        raise ApiError(400, "uid contains illegal characters")


@dataclass
class DashboardRecord:
    id: int
    uid: str
    title: str
    folder_uid: str
    version: int
    data: dict[str, Any]
    created: str
    updated: str
    versions: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class GrafanaState:
    """Everything the emulated Grafana holds; tests may inspect it directly."""

    tokens: dict[str, str] = field(default_factory=dict)  # token -> role
    datasources: dict[str, dict[str, Any]] = field(default_factory=dict)
    secure_json: dict[str, dict[str, str]] = field(default_factory=dict)
    folders: dict[str, dict[str, Any]] = field(default_factory=dict)
    dashboards: dict[str, DashboardRecord] = field(default_factory=dict)
    annotations: list[dict[str, Any]] = field(default_factory=list)
    alerting: AlertingState = field(default_factory=lambda: AlertingState())
    requests: list[tuple[str, str]] = field(default_factory=list)
    failures: list[tuple[int, str]] = field(default_factory=list)  # (status, path part)
    next_id: int = 1

    def allocate_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1


class GrafanaEmulator:
    """The API; `handle` maps (method, path, query, body, auth header) to (status, body)."""

    def __init__(self, tokens: dict[str, str] | None = None) -> None:
        self.state = GrafanaState(tokens=dict(tokens or {}))
        self.lock = threading.Lock()
        self.routes: list[tuple[str, re.Pattern[str], Callable[..., Any]]] = [
            (method, re.compile(f"^{pattern}$"), handler)
            for method, pattern, handler in (
                ("GET", r"/api/frontend/settings", self.frontend_settings),
                ("GET", r"/api/datasources", self.list_datasources),
                ("POST", r"/api/datasources", self.create_datasource),
                ("GET", r"/api/datasources/uid/(?P<uid>[^/]+)", self.get_datasource_by_uid),
                ("PUT", r"/api/datasources/uid/(?P<uid>[^/]+)", self.update_datasource_by_uid),
                ("DELETE", r"/api/datasources/uid/(?P<uid>[^/]+)", self.delete_datasource),
                ("GET", r"/api/datasources/name/(?P<name>[^/]+)", self.get_datasource_by_name),
                ("GET", r"/api/datasources/(?P<id>\d+)", self.get_datasource_by_id),
                ("PUT", r"/api/datasources/(?P<id>\d+)", self.update_datasource_by_id),
                ("GET", r"/api/folders", self.list_folders),
                ("POST", r"/api/folders", self.create_folder),
                ("GET", r"/api/folders/(?P<uid>[^/]+)", self.get_folder),
                ("PUT", r"/api/folders/(?P<uid>[^/]+)", self.update_folder),
                ("DELETE", r"/api/folders/(?P<uid>[^/]+)", self.delete_folder),
                ("POST", r"/api/dashboards/db/?", self.save_dashboard),
                ("GET", r"/api/dashboards/uid/(?P<uid>[^/]+)", self.get_dashboard),
                ("DELETE", r"/api/dashboards/uid/(?P<uid>[^/]+)", self.delete_dashboard),
                ("GET", r"/api/dashboards/uid/(?P<uid>[^/]+)/versions", self.list_versions),
                (
                    "GET",
                    r"/api/dashboards/uid/(?P<uid>[^/]+)/versions/(?P<version>\d+)",
                    self.get_version,
                ),
                ("GET", r"/api/search", self.search),
                ("GET", r"/api/annotations", self.find_annotations),
                ("POST", r"/api/annotations", self.create_annotation),
                ("DELETE", r"/api/annotations/(?P<id>\d+)", self.delete_annotation),
                *AlertingProvisioning(self.state).routes(),
            )
        ]

    # -- dispatch -------------------------------------------------------------------------

    def handle(
        self,
        method: str,
        target: str,
        body: bytes,
        authorization: str | None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        parts = urlsplit(target)
        path = parts.path.rstrip("/") if parts.path != "/" else parts.path
        query = parse_qs(parts.query)
        with self.lock:
            self.state.requests.append((method, path))
            if path == "/api/health" and method == "GET":
                return 200, {"commit": "emulator", "database": "ok", "version": GRAFANA_VERSION}
            if self.state.failures and self.state.failures[0][1] in path:
                status, _ = self.state.failures.pop(0)
                return status, {"message": "injected failure"}
            try:
                role = self._authenticate(authorization)
                for route_method, pattern, handler in self.routes:
                    match = pattern.match(path)
                    if match and route_method == method:
                        if method in WRITE_METHODS and role == "Viewer":
                            raise ApiError(
                                403,
                                "You'll need additional permissions to perform this action.",
                            )
                        payload = self._json(body) if method in {"POST", "PUT"} else {}
                        answer = handler(
                            query=query, payload=payload, headers=headers or {}, **match.groupdict()
                        )
                        if isinstance(answer, Answer):
                            return answer.status, answer.body
                        return 200, answer
                raise ApiError(404, "Not found")
            except ApiError as error:
                return error.http_status, error.body

    def _authenticate(self, authorization: str | None) -> str:
        if not authorization:
            raise ApiError(401, "Unauthorized")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or token not in self.state.tokens:
            raise ApiError(401, "Invalid API key", messageId="api-key.invalid", statusCode=401)
        return self.state.tokens[token]

    @staticmethod
    def _json(body: bytes) -> dict[str, Any]:
        try:
            payload = json.loads(body or b"{}")
        except ValueError as exc:
            raise ApiError(400, "bad request data") from exc
        if not isinstance(payload, dict):
            raise ApiError(400, "bad request data")
        return payload

    # -- health -----------------------------------------------------------------------------

    def frontend_settings(self, **_: Any) -> dict[str, Any]:
        return {"buildInfo": {"version": GRAFANA_VERSION, "commit": "emulator", "edition": "OSS"}}

    # -- data sources -----------------------------------------------------------------------

    def _datasource_view(self, uid: str) -> dict[str, Any]:
        view = copy.deepcopy(self.state.datasources[uid])
        view["secureJsonFields"] = {key: True for key in self.state.secure_json.get(uid, {})}
        return view

    def _datasource_uid_by_id(self, ds_id: str) -> str:
        for uid, ds in self.state.datasources.items():
            if ds["id"] == int(ds_id):
                return uid
        raise ApiError(404, "Data source not found")

    def list_datasources(self, **_: Any) -> list[dict[str, Any]]:
        return [self._datasource_view(uid) for uid in self.state.datasources]

    def get_datasource_by_uid(self, uid: str, **_: Any) -> dict[str, Any]:
        if uid not in self.state.datasources:
            raise ApiError(404, "Data source not found")
        return self._datasource_view(uid)

    def get_datasource_by_name(self, name: str, **_: Any) -> dict[str, Any]:
        for uid, ds in self.state.datasources.items():
            if ds["name"] == name:
                return self._datasource_view(uid)
        raise ApiError(404, "Data source not found")

    def get_datasource_by_id(self, id: str, **_: Any) -> dict[str, Any]:
        return self._datasource_view(self._datasource_uid_by_id(id))

    def _datasource_fields(self, payload: dict[str, Any]) -> dict[str, Any]:
        if not payload.get("name") or not payload.get("type"):
            raise ApiError(400, "bad request data")
        return {
            "name": payload["name"],
            "type": payload["type"],
            "typeName": payload["type"],
            "access": payload.get("access", "proxy"),
            "url": payload.get("url", ""),
            "user": payload.get("user", ""),
            "database": payload.get("database", ""),
            "basicAuth": bool(payload.get("basicAuth", False)),
            "basicAuthUser": payload.get("basicAuthUser", ""),
            "withCredentials": bool(payload.get("withCredentials", False)),
            "isDefault": bool(payload.get("isDefault", False)),
            "jsonData": copy.deepcopy(payload.get("jsonData") or {}),
            "readOnly": False,
        }

    def _check_datasource_name_free(self, name: str, own_uid: str | None) -> None:
        for uid, ds in self.state.datasources.items():
            if ds["name"] == name and uid != own_uid:
                raise ApiError(409, "data source with the same name already exists")

    def create_datasource(self, payload: dict[str, Any], **_: Any) -> dict[str, Any]:
        fields = self._datasource_fields(payload)
        uid = payload.get("uid") or _new_uid()
        _check_uid(uid)
        if uid in self.state.datasources:
            raise ApiError(409, "data source with the same uid already exists")
        self._check_datasource_name_free(fields["name"], None)
        ds_id = self.state.allocate_id()
        self.state.datasources[uid] = {"id": ds_id, "uid": uid, "orgId": 1, **fields, "version": 1}
        self.state.secure_json[uid] = dict(payload.get("secureJsonData") or {})
        view = self._datasource_view(uid)
        return {
            "datasource": view,
            "id": ds_id,
            "message": "Datasource added",
            "name": view["name"],
        }

    def update_datasource_by_uid(
        self, uid: str, payload: dict[str, Any], **_: Any
    ) -> dict[str, Any]:
        if uid not in self.state.datasources:
            raise ApiError(404, "Data source not found")
        current = self.state.datasources[uid]
        fields = self._datasource_fields(payload)
        self._check_datasource_name_free(fields["name"], uid)
        version = payload.get("version")
        if version and int(version) < current["version"]:
            raise ApiError(
                409,
                "Datasource has already been updated by someone else. Please reload and try again",
            )
        current.update(fields, version=current["version"] + 1)
        secure = self.state.secure_json.setdefault(uid, {})
        secure.update(payload.get("secureJsonData") or {})
        view = self._datasource_view(uid)
        return {
            "datasource": view,
            "id": current["id"],
            "message": "Datasource updated",
            "name": view["name"],
        }

    def update_datasource_by_id(self, id: str, payload: dict[str, Any], **_: Any) -> Any:
        return self.update_datasource_by_uid(self._datasource_uid_by_id(id), payload)

    def delete_datasource(self, uid: str, **_: Any) -> dict[str, Any]:
        if uid not in self.state.datasources:
            raise ApiError(404, "Data source not found")
        ds = self.state.datasources.pop(uid)
        self.state.secure_json.pop(uid, None)
        return {"message": "Data source deleted", "id": ds["id"]}

    # -- folders ----------------------------------------------------------------------------

    def list_folders(self, **_: Any) -> list[dict[str, Any]]:
        return [{"id": f["id"], "uid": f["uid"], "title": f["title"]} for f in self._folders()]

    def _folders(self) -> list[dict[str, Any]]:
        return sorted(self.state.folders.values(), key=lambda f: f["title"].lower())

    def get_folder(self, uid: str, **_: Any) -> dict[str, Any]:
        if uid not in self.state.folders:
            raise ApiError(404, "folder not found", status="not-found")
        return copy.deepcopy(self.state.folders[uid])

    def _check_folder_title_free(self, title: str, own_uid: str | None) -> None:
        for uid, folder in self.state.folders.items():
            if folder["title"].lower() == title.lower() and uid != own_uid:
                raise ApiError(
                    409,
                    "a folder or dashboard in the general folder with the same name already exists",
                )

    def create_folder(self, payload: dict[str, Any], **_: Any) -> dict[str, Any]:
        title = (payload.get("title") or "").strip()
        if not title:
            raise ApiError(400, "folder title cannot be empty")
        uid = payload.get("uid") or _new_uid()
        _check_uid(uid)
        if uid in self.state.folders or uid in self.state.dashboards:
            raise ApiError(409, "a folder/dashboard with the same uid already exists")
        self._check_folder_title_free(title, None)
        now = _now_iso()
        folder = {
            "id": self.state.allocate_id(),
            "uid": uid,
            "orgId": 1,
            "title": title,
            "url": f"/dashboards/f/{uid}/{slugify(title)}",
            "hasAcl": False,
            "canSave": True,
            "canEdit": True,
            "canAdmin": True,
            "canDelete": True,
            "createdBy": "service-account",
            "created": now,
            "updatedBy": "service-account",
            "updated": now,
            "version": 1,
        }
        self.state.folders[uid] = folder
        return copy.deepcopy(folder)

    def update_folder(self, uid: str, payload: dict[str, Any], **_: Any) -> dict[str, Any]:
        if uid not in self.state.folders:
            raise ApiError(404, "folder not found", status="not-found")
        folder = self.state.folders[uid]
        if not payload.get("overwrite") and payload.get("version") != folder["version"]:
            raise ApiError(
                412, "the folder has been changed by someone else", status="version-mismatch"
            )
        title = (payload.get("title") or folder["title"]).strip()
        self._check_folder_title_free(title, uid)
        folder.update(
            title=title,
            url=f"/dashboards/f/{uid}/{slugify(title)}",
            version=folder["version"] + 1,
            updated=_now_iso(),
        )
        return copy.deepcopy(folder)

    def delete_folder(self, uid: str, **_: Any) -> dict[str, Any]:
        if uid not in self.state.folders:
            raise ApiError(404, "folder not found", status="not-found")
        folder = self.state.folders.pop(uid)
        for dash_uid in [u for u, d in self.state.dashboards.items() if d.folder_uid == uid]:
            del self.state.dashboards[dash_uid]
        return {"message": "Folder deleted", "id": folder["id"], "title": folder["title"]}

    # -- dashboards -------------------------------------------------------------------------

    def _existing_for_update(self, dash: dict[str, Any], overwrite: bool) -> DashboardRecord | None:
        """Grafana's getExistingDashboardByIDOrUIDForUpdate."""
        by_id = None
        if dash.get("id"):
            by_id = next((d for d in self.state.dashboards.values() if d.id == dash["id"]), None)
            if by_id is None:
                raise ApiError(404, "Dashboard not found", status="not-found")
            dash.setdefault("uid", by_id.uid)
        by_uid = self.state.dashboards.get(dash.get("uid") or "")
        if by_id and by_uid and by_id.id != by_uid.id:
            raise ApiError(400, "A dashboard with the same uid already exists")
        existing = by_id or by_uid
        if existing is None:
            return None
        if dash.get("version") != existing.version:
            if not overwrite:
                raise ApiError(
                    412,
                    "The dashboard has been changed by someone else",
                    status="version-mismatch",
                )
            dash["version"] = existing.version
        return existing

    def _same_title_in_folder(
        self, title: str, folder_uid: str, own: DashboardRecord | None, overwrite: bool
    ) -> DashboardRecord | None:
        """Grafana's getExistingDashboardByTitleAndFolder."""
        for record in self.state.dashboards.values():
            if record.title == title and record.folder_uid == folder_uid and record is not own:
                if not overwrite:
                    raise ApiError(
                        412,
                        "A dashboard with the same name in the folder already exists",
                        status="name-exists",
                    )
                return record
        return own

    def save_dashboard(self, payload: dict[str, Any], **_: Any) -> dict[str, Any]:
        dash = payload.get("dashboard")
        if not isinstance(dash, dict):
            raise ApiError(400, "bad request data")
        dash = copy.deepcopy(dash)
        title = (dash.get("title") or "").strip()
        if not title:
            raise ApiError(400, "Dashboard title cannot be empty")
        if dash.get("uid"):
            _check_uid(dash["uid"])
        folder_uid = payload.get("folderUid") or ""
        if folder_uid and folder_uid not in self.state.folders:
            raise ApiError(400, "folder not found")
        overwrite = bool(payload.get("overwrite"))
        existing = self._existing_for_update(dash, overwrite)
        existing = self._same_title_in_folder(title, folder_uid, existing, overwrite)
        now = _now_iso()
        if existing is None:
            uid = dash.get("uid") or _new_uid()
            if uid in self.state.folders:
                raise ApiError(400, "A dashboard with the same uid already exists")
            record = DashboardRecord(
                id=self.state.allocate_id(),
                uid=uid,
                title=title,
                folder_uid=folder_uid,
                version=0,
                data={},
                created=now,
                updated=now,
            )
            self.state.dashboards[uid] = record
        else:
            record = existing
            if record.uid != dash.get("uid", record.uid):
                del self.state.dashboards[record.uid]
                record.uid = dash["uid"]
                self.state.dashboards[record.uid] = record
        parent = record.version
        record.version += 1
        record.title, record.folder_uid, record.updated = title, folder_uid, now
        dash.update(id=record.id, uid=record.uid, version=record.version, title=title)
        record.data = dash
        record.versions.append(
            {
                "id": len(record.versions) + 1,
                "dashboardId": record.id,
                "uid": record.uid,
                "parentVersion": parent,
                "restoredFrom": 0,
                "version": record.version,
                "created": now,
                "createdBy": "service-account",
                "message": payload.get("message") or "",
                "data": copy.deepcopy(dash),
            }
        )
        slug = slugify(title)
        return {
            "id": record.id,
            "uid": record.uid,
            "url": f"/d/{record.uid}/{slug}",
            "status": "success",
            "version": record.version,
            "slug": slug,
            "folderUid": folder_uid,
        }

    def _dashboard(self, uid: str) -> DashboardRecord:
        if uid not in self.state.dashboards:
            raise ApiError(404, "Dashboard not found", status="not-found")
        return self.state.dashboards[uid]

    def get_dashboard(self, uid: str, **_: Any) -> dict[str, Any]:
        record = self._dashboard(uid)
        folder = self.state.folders.get(record.folder_uid)
        slug = slugify(record.title)
        return {
            "dashboard": copy.deepcopy(record.data),
            "meta": {
                "type": "db",
                "canSave": True,
                "canEdit": True,
                "canAdmin": True,
                "canStar": True,
                "canDelete": True,
                "slug": slug,
                "url": f"/d/{record.uid}/{slug}",
                "expires": "0001-01-01T00:00:00Z",
                "created": record.created,
                "updated": record.updated,
                "updatedBy": "service-account",
                "createdBy": "service-account",
                "version": record.version,
                "hasAcl": False,
                "isFolder": False,
                "folderId": folder["id"] if folder else 0,
                "folderUid": record.folder_uid,
                "folderTitle": folder["title"] if folder else "General",
                "folderUrl": folder["url"] if folder else "",
                "provisioned": False,
                "provisionedExternalId": "",
            },
        }

    def delete_dashboard(self, uid: str, **_: Any) -> dict[str, Any]:
        record = self._dashboard(uid)
        del self.state.dashboards[uid]
        return {
            "title": record.title,
            "message": f"Dashboard {record.title} deleted",
            "id": record.id,
        }

    def list_versions(self, uid: str, query: dict[str, list[str]], **_: Any) -> dict[str, Any]:
        record = self._dashboard(uid)
        limit = int(query.get("limit", ["1000"])[0] or 1000)
        start = int(query.get("start", ["0"])[0] or 0)
        newest_first = sorted(record.versions, key=lambda v: -v["version"])[start : start + limit]
        return {
            "continueToken": "",
            "versions": [{k: v for k, v in item.items() if k != "data"} for item in newest_first],
        }

    def get_version(self, uid: str, version: str, **_: Any) -> dict[str, Any]:
        record = self._dashboard(uid)
        for item in record.versions:
            if item["version"] == int(version):
                return copy.deepcopy(item)
        raise ApiError(404, "Dashboard version not found")

    # -- search -----------------------------------------------------------------------------

    def search(self, query: dict[str, list[str]], **_: Any) -> list[dict[str, Any]]:
        text = (query.get("query", [""])[0] or "").lower()
        kind = query.get("type", [""])[0]
        folder_uids = set(query.get("folderUIDs", []))
        dashboard_uids = set(query.get("dashboardUIDs", []))
        tags = set(query.get("tag", []))
        limit = int(query.get("limit", ["1000"])[0] or 1000)
        hits: list[dict[str, Any]] = []
        if kind in ("", "dash-folder") and not dashboard_uids and not tags:
            for folder in self._folders():
                if text in folder["title"].lower() and (
                    not folder_uids or "general" in folder_uids
                ):
                    hits.append(
                        {
                            "id": folder["id"],
                            "uid": folder["uid"],
                            "title": folder["title"],
                            "uri": f"db/{slugify(folder['title'])}",
                            "url": folder["url"],
                            "slug": "",
                            "type": "dash-folder",
                            "tags": [],
                            "isStarred": False,
                            "sortMeta": 0,
                        }
                    )
        if kind in ("", "dash-db"):
            for record in sorted(self.state.dashboards.values(), key=lambda d: d.title.lower()):
                folder = self.state.folders.get(record.folder_uid)
                in_folder = (record.folder_uid or "general") in folder_uids
                if (
                    text in record.title.lower()
                    and (not folder_uids or in_folder)
                    and (not dashboard_uids or record.uid in dashboard_uids)
                    and tags <= set(record.data.get("tags") or [])
                ):
                    hits.append(
                        {
                            "id": record.id,
                            "uid": record.uid,
                            "title": record.title,
                            "uri": f"db/{slugify(record.title)}",
                            "url": f"/d/{record.uid}/{slugify(record.title)}",
                            "slug": "",
                            "type": "dash-db",
                            "tags": list(record.data.get("tags") or []),
                            "isStarred": False,
                            "sortMeta": 0,
                            "folderId": folder["id"] if folder else 0,
                            "folderUid": record.folder_uid,
                            "folderTitle": folder["title"] if folder else "",
                            "folderUrl": folder["url"] if folder else "",
                        }
                    )
        return hits[:limit]

    # -- annotations ------------------------------------------------------------------------

    def create_annotation(self, payload: dict[str, Any], **_: Any) -> dict[str, Any]:
        if not payload.get("text"):
            raise ApiError(400, "Failed to save annotation")
        now = _now_ms()
        epoch = int(payload.get("time") or now)
        dashboard_uid = payload.get("dashboardUID") or ""
        if dashboard_uid and dashboard_uid not in self.state.dashboards:
            raise ApiError(404, "Dashboard not found", status="not-found")
        annotation = {
            "id": self.state.allocate_id(),
            "alertId": 0,
            "alertName": "",
            "dashboardId": (self.state.dashboards[dashboard_uid].id if dashboard_uid else 0),
            "dashboardUID": dashboard_uid,
            "panelId": int(payload.get("panelId") or 0),
            "userId": 0,
            "newState": "",
            "prevState": "",
            "created": now,
            "updated": now,
            "time": epoch,
            "timeEnd": int(payload.get("timeEnd") or epoch),
            "text": payload["text"],
            "tags": [str(tag) for tag in payload.get("tags") or []],
            "login": "service-account",
            "email": "",
            "avatarUrl": "",
            "data": payload.get("data") or {},
        }
        self.state.annotations.append(annotation)
        return {"message": "Annotation added", "id": annotation["id"]}

    def find_annotations(self, query: dict[str, list[str]], **_: Any) -> list[dict[str, Any]]:
        start = int(query.get("from", ["0"])[0] or 0)
        end = int(query.get("to", ["0"])[0] or 0)
        tags = set(query.get("tags", []))
        match_any = query.get("matchAny", ["false"])[0] == "true"
        dashboard_uid = query.get("dashboardUID", [""])[0]
        kind = query.get("type", [""])[0]
        limit = int(query.get("limit", ["100"])[0] or 100)
        found = []
        for annotation in self.state.annotations:
            if start and end and not (annotation["time"] <= end and annotation["timeEnd"] >= start):
                continue
            own_tags = set(annotation["tags"])
            if tags and not (own_tags & tags if match_any else tags <= own_tags):
                continue
            if dashboard_uid and annotation["dashboardUID"] != dashboard_uid:
                continue
            if kind == "alert" and not annotation["alertId"]:
                continue
            if kind == "annotation" and annotation["alertId"]:
                continue
            found.append(copy.deepcopy(annotation))
        found.sort(key=lambda a: a["time"] * 1000 + a["timeEnd"], reverse=True)
        return found[:limit]

    def delete_annotation(self, id: str, **_: Any) -> dict[str, Any]:
        before = len(self.state.annotations)
        self.state.annotations = [a for a in self.state.annotations if a["id"] != int(id)]
        if len(self.state.annotations) == before:
            raise ApiError(404, "Annotation not found")
        return {"message": "Annotation deleted"}


# -- alerting provisioning ---------------------------------------------------------------------

BASE_INTERVAL_S = 10  # [unified_alerting] base_interval
DEFAULT_INTERVAL_S = 60  # [unified_alerting] default rule group interval (POST of a single rule)
EXPRESSION_UID = "__expr__"
NO_DATA_STATES = {"NoData", "Alerting", "OK", "KeepLast"}
EXEC_ERR_STATES = {"Error", "Alerting", "OK", "KeepLast"}
RESERVED_LABELS = {"__alert_rule_uid__", "__alert_rule_namespace_uid__", "grafana_folder", "alertname"}
PROMETHEUS_UNITS = (("y", 365 * 86400), ("w", 604800), ("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
PROMETHEUS_DURATION = re.compile(r"^(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
PROVENANCE_API = "api"
PROVENANCE_NONE = ""
DEFAULT_RECEIVER = "grafana-default-email"


def _parse_duration(text: Any) -> int:
    """Prometheus model.ParseDuration (whole seconds); JSON binding fails on anything else."""
    match = PROMETHEUS_DURATION.match(str(text)) if text not in ("", None) else None
    if text == "0":
        return 0
    if match is None or not any(match.groups()):
        raise ApiError(400, "bad request data")
    return sum(
        int(value or 0) * size for value, (_, size) in zip(match.groups(), PROMETHEUS_UNITS, strict=True)
    )


def _format_duration(seconds: int) -> str:
    """Prometheus model.Duration.String(): 0s, 5m, 1h30m."""
    if seconds == 0:
        return "0s"
    parts = []
    for unit, size in PROMETHEUS_UNITS:
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts)


def _provenance(headers: dict[str, str]) -> str:
    """determineProvenance: the X-Disable-Provenance header's presence (any value) means none."""
    return PROVENANCE_NONE if "x-disable-provenance" in headers else PROVENANCE_API


def _provenance_error(stored: str, wanted: str) -> ApiError:
    """validation.MakeErrProvenanceChangeNotAllowed (errutil Forbidden)."""
    return ApiError(
        403,
        f"Resource with provenance status '{stored or 'none'}' cannot be managed via API that handles "
        f"resources with provenance status '{wanted or 'none'}'. You must use appropriate API to manage "
        "this resource",
        messageId="alerting.notifications.invalidProvenance",
        statusCode=403,
    )


@dataclass
class AlertingState:
    """Alert rules (uid -> stored rule), contact points, the policy tree and templates."""

    rules: dict[str, dict[str, Any]] = field(default_factory=dict)
    contact_points: list[dict[str, Any]] = field(
        default_factory=lambda: [
            {
                "uid": "default-email",
                "name": DEFAULT_RECEIVER,
                "type": "email",
                "settings": {"addresses": "<example@email.com>"},
                "disableResolveMessage": False,
                "provenance": PROVENANCE_NONE,
            }
        ]
    )
    policies: dict[str, Any] = field(
        default_factory=lambda: {"receiver": DEFAULT_RECEIVER, "group_by": ["grafana_folder", "alertname"]}
    )
    policies_provenance: str = PROVENANCE_NONE
    templates: dict[str, dict[str, Any]] = field(default_factory=dict)
    next_rule_id: int = 1


class AlertingProvisioning:
    """Grafana 11's alerting provisioning API over the emulator's state.

    As the real one: rules are validated as `AlertRule.ValidateAlertRule` and `AlertQuery.PreSave`
    do (uid, title, data, relative time ranges of data source queries, no-data and error states,
    `for`, dashboard/panel annotation pairs, reserved labels, a folder that exists) and answer 400
    with Grafana's messages; a title is unique within its org and folder (the store's unique
    constraint: 400 `alerting.alert-rule.conflict`, also when a group PUT would leave two); every
    query model gains `intervalMs`/`maxDataPoints` when missing; a rule group PUT replaces the
    group (rules left out are deleted, rules named from another group move into it), refuses an
    interval that is not a positive multiple of the 10 s base interval and changes nothing when
    nothing differs. Provenance: `api` unless the X-Disable-Provenance header is present; a
    resource provisioned with another provenance answers 403. Templates carry a `version` that a
    stale write conflicts with (409). A missing rule or group is 404.
    """

    def __init__(self, state: GrafanaState) -> None:
        self.state = state
        self.alerting = state.alerting

    def routes(self) -> list[tuple[str, str, Callable[..., Any]]]:
        base = r"/api/v1/provisioning"
        group = base + r"/folder/(?P<folder>[^/]+)/rule-groups/(?P<group>[^/]+)"
        return [
            ("GET", base + r"/alert-rules", self.list_rules),
            ("POST", base + r"/alert-rules", self.create_rule),
            ("GET", base + r"/alert-rules/(?P<uid>[^/]+)", self.get_rule),
            ("PUT", base + r"/alert-rules/(?P<uid>[^/]+)", self.update_rule),
            ("DELETE", base + r"/alert-rules/(?P<uid>[^/]+)", self.delete_rule),
            ("GET", group, self.get_group),
            ("PUT", group, self.put_group),
            ("DELETE", group, self.delete_group),
            ("GET", base + r"/contact-points", self.list_contact_points),
            ("POST", base + r"/contact-points", self.create_contact_point),
            ("PUT", base + r"/contact-points/(?P<uid>[^/]+)", self.update_contact_point),
            ("DELETE", base + r"/contact-points/(?P<uid>[^/]+)", self.delete_contact_point),
            ("GET", base + r"/policies", self.get_policies),
            ("PUT", base + r"/policies", self.put_policies),
            ("DELETE", base + r"/policies", self.reset_policies),
            ("GET", base + r"/templates", self.list_templates),
            ("GET", base + r"/templates/(?P<name>[^/]+)", self.get_template),
            ("PUT", base + r"/templates/(?P<name>[^/]+)", self.put_template),
            ("DELETE", base + r"/templates/(?P<name>[^/]+)", self.delete_template),
        ]

    # -- rules: validation and views -----------------------------------------------------------

    def _validated(self, payload: dict[str, Any], interval_s: int) -> dict[str, Any]:
        """A rule as Grafana stores it, or the 400 Grafana answers."""
        invalid = "invalid alert rule"
        uid = payload.get("uid") or _new_uid()
        if len(uid) > 40 or not UID_PATTERN.match(uid):
            raise ApiError(400, f"{invalid}: cannot create rule with UID '{uid}': invalid format")
        data = payload.get("data")
        if not isinstance(data, list) or not data:
            raise ApiError(400, f"{invalid}: no queries or expressions are found")
        title = str(payload.get("title") or "")
        if not title:
            raise ApiError(400, f"{invalid}: title is empty")
        if interval_s <= 0 or interval_s % BASE_INTERVAL_S:
            raise ApiError(
                400,
                f"{invalid}: interval ({interval_s}s) should be non-zero and divided exactly by "
                f"scheduler interval: {BASE_INTERVAL_S}",
            )
        folder_uid = payload.get("folderUID") or ""
        if not folder_uid:
            raise ApiError(400, f"{invalid}: folderUID must be set")
        if folder_uid not in self.state.folders:
            raise ApiError(400, f"{invalid}: folder does not exist")
        if not payload.get("ruleGroup"):
            raise ApiError(400, f"{invalid}: rule group name must be set")
        annotations = {str(k): str(v) for k, v in (payload.get("annotations") or {}).items()}
        dashboard_uid, panel_id = annotations.get("__dashboardUid__", ""), annotations.get("__panelId__", "")
        if bool(dashboard_uid) != bool(panel_id):
            raise ApiError(
                400, f"{invalid}: both annotations __dashboardUid__ and __panelId__ must be specified"
            )
        if panel_id and not panel_id.lstrip("-").isdigit():
            raise ApiError(400, f"{invalid}: annotation __panelId__ must be a valid integer Panel ID")
        if payload.get("execErrState") not in EXEC_ERR_STATES:
            raise ApiError(400, f"{invalid}: unknown Execution Error state: {payload.get('execErrState')}")
        if payload.get("noDataState") not in NO_DATA_STATES:
            raise ApiError(400, f"{invalid}: unknown NoData state option: {payload.get('noDataState')}")
        labels = {str(k): str(v) for k, v in (payload.get("labels") or {}).items()}
        for label in labels:
            if label in RESERVED_LABELS:
                raise ApiError(400, f"{invalid}: system reserved label {label} cannot be defined")
        return {
            "uid": uid,
            "orgID": 1,
            "folderUID": folder_uid,
            "ruleGroup": payload["ruleGroup"],
            "title": title,
            "condition": payload.get("condition") or "",
            "data": [self._query(query) for query in data],
            "noDataState": payload["noDataState"],
            "execErrState": payload["execErrState"],
            "for_s": _parse_duration(payload.get("for", "0s")),
            "annotations": annotations,
            "labels": labels,
            "isPaused": bool(payload.get("isPaused", False)),
            "interval_s": interval_s,
        }

    @staticmethod
    def _query(query: Any) -> dict[str, Any]:
        if not isinstance(query, dict) or not isinstance(query.get("model"), dict):
            raise ApiError(400, "bad request data")
        model = {"intervalMs": 1000, "maxDataPoints": 43200, **copy.deepcopy(query["model"])}
        span = query.get("relativeTimeRange") or {"from": 0, "to": 0}
        is_expression = query.get("datasourceUid") == EXPRESSION_UID
        if not is_expression and not int(span.get("from", 0)) > int(span.get("to", 0)):
            raise ApiError(
                400,
                f"invalid alert query {query.get('refId')}: invalid relative time range "
                f"[From: {span.get('from')}s, To: {span.get('to')}s]",
            )
        return {
            "refId": query.get("refId", ""),
            # PreSave: the model's queryType, when it has one, becomes the query's.
            "queryType": model.get("queryType") or query.get("queryType", ""),
            "relativeTimeRange": {"from": int(span.get("from", 0)), "to": int(span.get("to", 0))},
            "datasourceUid": query.get("datasourceUid", ""),
            "model": model,
        }

    @staticmethod
    def _content(rule: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in rule.items() if k not in ("id", "updated", "version", "provenance", "index")}

    def _view(self, rule: dict[str, Any], with_provenance: bool = True) -> dict[str, Any]:
        """ProvisionedAlertRule JSON (provenance omitted when none, as `omitempty` does)."""
        view = {
            "id": rule["id"],
            "uid": rule["uid"],
            "orgID": rule["orgID"],
            "folderUID": rule["folderUID"],
            "ruleGroup": rule["ruleGroup"],
            "title": rule["title"],
            "condition": rule["condition"],
            "data": copy.deepcopy(rule["data"]),
            "updated": rule["updated"],
            "noDataState": rule["noDataState"],
            "execErrState": rule["execErrState"],
            "for": _format_duration(rule["for_s"]),
            "isPaused": rule["isPaused"],
        }
        if rule["annotations"]:
            view["annotations"] = dict(rule["annotations"])
        if rule["labels"]:
            view["labels"] = dict(rule["labels"])
        if with_provenance and rule["provenance"]:
            view["provenance"] = rule["provenance"]
        return view

    def _store(self, rule: dict[str, Any], provenance: str, existing: dict[str, Any] | None) -> None:
        stored = {
            **rule,
            "id": existing["id"] if existing else self.alerting.next_rule_id,
            "version": existing["version"] + 1 if existing else 1,
            "updated": _now_iso(),
            "provenance": provenance,
            "index": rule.get("index", existing["index"] if existing else 0),
        }
        if existing is None:
            self.alerting.next_rule_id += 1
        self.alerting.rules[rule["uid"]] = stored

    def _rule(self, uid: str) -> dict[str, Any]:
        if uid not in self.alerting.rules:
            raise ApiError(404, "")
        return self.alerting.rules[uid]

    def _refuse_title_conflicts(
        self, rules: list[dict[str, Any]], leaving: frozenset[str] = frozenset()
    ) -> None:
        """The rules' titles against each other and the folder's other rules (all but those in
        `leaving`, which the same write deletes), as the store's UNIQUE (org, folder, title)."""
        rewritten = leaving | {rule["uid"] for rule in rules}
        held = {(r["folderUID"], r["title"]): r["uid"] for r in self.alerting.rules.values()
                if r["uid"] not in rewritten}
        for rule in rules:
            key = (rule["folderUID"], rule["title"])
            if held.setdefault(key, rule["uid"]) != rule["uid"]:
                raise ApiError(
                    400,
                    "[alerting.alert-rule.conflict] conflicting alert rule found "
                    f"[rule_uid: '{rule['uid']}', title: '{rule['title']}', namespace_uid: "
                    f"'{rule['folderUID']}']: rule title under the same organisation and folder "
                    "should be unique",
                    messageId="alerting.alert-rule.conflict",
                )

    def _group_rules(self, folder: str, group: str) -> list[dict[str, Any]]:
        rules = [
            r for r in self.alerting.rules.values() if r["folderUID"] == folder and r["ruleGroup"] == group
        ]
        return sorted(rules, key=lambda r: (r["index"], r["id"]))

    # -- rules: endpoints ----------------------------------------------------------------------

    def list_rules(self, **_: Any) -> list[dict[str, Any]]:
        return [self._view(rule) for rule in sorted(self.alerting.rules.values(), key=lambda r: r["id"])]

    def get_rule(self, uid: str, **_: Any) -> Any:
        if uid not in self.alerting.rules:
            return Answer(404)
        return self._view(self.alerting.rules[uid])

    def create_rule(self, payload: dict[str, Any], headers: dict[str, str], **_: Any) -> Answer:
        existing_group = self._group_rules(payload.get("folderUID") or "", payload.get("ruleGroup") or "")
        interval = existing_group[0]["interval_s"] if existing_group else DEFAULT_INTERVAL_S
        rule = self._validated(payload, interval)
        if rule["uid"] in self.alerting.rules:
            raise ApiError(400, "failed to insert alert rules: a conflicting alert rule is found: rule UID")
        self._refuse_title_conflicts([rule])
        rule["index"] = len(existing_group) + 1
        self._store(rule, _provenance(headers), None)
        return Answer(201, self._view(self.alerting.rules[rule["uid"]]))

    def update_rule(self, uid: str, payload: dict[str, Any], headers: dict[str, str], **_: Any) -> Any:
        if uid not in self.alerting.rules:
            return Answer(404)
        existing = self.alerting.rules[uid]
        provenance = _provenance(headers)
        if existing["provenance"] not in (provenance, PROVENANCE_NONE):
            raise _provenance_error(existing["provenance"], provenance)
        rule = self._validated({**payload, "uid": uid}, existing["interval_s"])
        self._refuse_title_conflicts([rule])
        self._store(rule, provenance, existing)
        return self._view(self.alerting.rules[uid])

    def delete_rule(self, uid: str, headers: dict[str, str], **_: Any) -> Answer:
        existing = self.alerting.rules.get(uid)
        provenance = _provenance(headers)
        if existing is not None:
            if existing["provenance"] not in (provenance, PROVENANCE_NONE):
                raise _provenance_error(existing["provenance"], provenance)
            del self.alerting.rules[uid]
        return Answer(204)

    def get_group(self, folder: str, group: str, **_: Any) -> dict[str, Any]:
        rules = self._group_rules(folder, group)
        if not rules:
            raise ApiError(
                404, "rule group not found under this folder", messageId="alerting.alert-rule.notFound"
            )
        return {
            "title": group,
            "folderUid": folder,
            "interval": rules[0]["interval_s"],
            "rules": [self._view(rule, with_provenance=False) for rule in rules],
        }

    @staticmethod
    def _may_change_in_group(stored: str, wanted: str) -> bool:
        """validation.CanUpdateProvenanceInRuleGroup."""
        return stored in (wanted, PROVENANCE_NONE) or (stored == PROVENANCE_API and wanted == PROVENANCE_NONE)

    def put_group(
        self, folder: str, group: str, payload: dict[str, Any], headers: dict[str, str], **_: Any
    ) -> dict[str, Any]:
        interval = payload.get("interval")
        if not isinstance(interval, int) or isinstance(interval, bool):
            raise ApiError(400, "bad request data")  # the JSON binding of an int64
        if interval <= 0 or interval % BASE_INTERVAL_S:
            raise ApiError(
                400,
                f"invalid alert rule: interval ({interval}s) should be non-zero and divided exactly by "
                f"scheduler interval: {BASE_INTERVAL_S}",
            )
        provenance = _provenance(headers)
        current = {rule["uid"]: rule for rule in self._group_rules(folder, group)}
        wanted = []
        for index, item in enumerate(payload.get("rules") or [], start=1):
            if not isinstance(item, dict):
                raise ApiError(400, "bad request data")
            rule = self._validated({**item, "folderUID": folder, "ruleGroup": group}, interval)
            rule["index"] = index
            wanted.append(rule)
        if len({rule["uid"] for rule in wanted}) != len(wanted):
            raise ApiError(400, "invalid alert rule: rule uids in a group must be unique")
        deleted = [uid for uid in current if uid not in {rule["uid"] for rule in wanted}]
        self._refuse_title_conflicts(wanted, leaving=frozenset(deleted))
        changed = [
            rule
            for rule in wanted
            if rule["uid"] not in self.alerting.rules
            or self._content(self.alerting.rules[rule["uid"]]) != self._content(rule)
            or self.alerting.rules[rule["uid"]]["index"] != rule["index"]
        ]
        for uid in deleted + [rule["uid"] for rule in changed if rule["uid"] in self.alerting.rules]:
            stored = self.alerting.rules[uid]["provenance"]
            if not self._may_change_in_group(stored, provenance):
                raise _provenance_error(stored, provenance)
        for uid in deleted:
            del self.alerting.rules[uid]
        for rule in changed:
            self._store(rule, provenance, self.alerting.rules.get(rule["uid"]))
        return {
            "title": group,
            "folderUid": folder,
            "interval": interval,
            "rules": payload.get("rules") or [],
        }

    def delete_group(self, folder: str, group: str, headers: dict[str, str], **_: Any) -> Answer:
        rules = self._group_rules(folder, group)
        if not rules:
            raise ApiError(
                404, "rule group not found under this folder", messageId="alerting.alert-rule.notFound"
            )
        provenance = _provenance(headers)
        for rule in rules:
            if not self._may_change_in_group(rule["provenance"], provenance):
                raise _provenance_error(rule["provenance"], provenance)
        for rule in rules:
            del self.alerting.rules[rule["uid"]]
        return Answer(204)

    # -- contact points, policies, templates ---------------------------------------------------

    def list_contact_points(self, query: dict[str, list[str]], **_: Any) -> list[dict[str, Any]]:
        name = query.get("name", [""])[0]
        return [copy.deepcopy(cp) for cp in self.alerting.contact_points if not name or cp["name"] == name]

    def _contact_point(self, payload: dict[str, Any], uid: str, provenance: str) -> dict[str, Any]:
        if not payload.get("name"):
            raise ApiError(400, "invalid object specification: name must be set")
        if not payload.get("type"):
            raise ApiError(400, "invalid object specification: type must be set")
        return {
            "uid": uid,
            "name": payload["name"],
            "type": payload["type"],
            "settings": copy.deepcopy(payload.get("settings") or {}),
            "disableResolveMessage": bool(payload.get("disableResolveMessage", False)),
            "provenance": provenance,
        }

    def create_contact_point(self, payload: dict[str, Any], headers: dict[str, str], **_: Any) -> Answer:
        uid = payload.get("uid") or _new_uid()
        if any(cp["uid"] == uid for cp in self.alerting.contact_points):
            raise ApiError(
                400, f"invalid object specification: a contact point with UID '{uid}' already exists"
            )
        point = self._contact_point(payload, uid, _provenance(headers))
        self.alerting.contact_points.append(point)
        return Answer(202, copy.deepcopy(point))

    def _contact_point_index(self, uid: str) -> int:
        for index, point in enumerate(self.alerting.contact_points):
            if point["uid"] == uid:
                return index
        raise ApiError(404, "contact point not found")

    def update_contact_point(
        self, uid: str, payload: dict[str, Any], headers: dict[str, str], **_: Any
    ) -> Answer:
        index = self._contact_point_index(uid)
        provenance = _provenance(headers)
        stored = self.alerting.contact_points[index]["provenance"]
        if stored not in (provenance, PROVENANCE_NONE):
            raise _provenance_error(stored, provenance)
        self.alerting.contact_points[index] = self._contact_point(payload, uid, provenance)
        return Answer(202, {"message": "contactpoint updated"})

    def delete_contact_point(self, uid: str, **_: Any) -> Answer:
        index = self._contact_point_index(uid)
        if self.alerting.contact_points[index]["name"] in self._receivers(self.alerting.policies):
            raise ApiError(409, "contact point is currently used by a notification policy")
        del self.alerting.contact_points[index]
        return Answer(202, {"message": "contactpoint deleted"})

    def _receivers(self, route: dict[str, Any]) -> set[str]:
        names = {route["receiver"]} if route.get("receiver") else set()
        for child in route.get("routes") or []:
            names |= self._receivers(child)
        return names

    def get_policies(self, **_: Any) -> dict[str, Any]:
        tree = copy.deepcopy(self.alerting.policies)
        if self.alerting.policies_provenance:
            tree["provenance"] = self.alerting.policies_provenance
        return tree

    def put_policies(self, payload: dict[str, Any], headers: dict[str, str], **_: Any) -> Answer:
        if not payload.get("receiver"):
            raise ApiError(400, "invalid object specification: root route must specify a default receiver")
        known = {cp["name"] for cp in self.alerting.contact_points}
        for receiver in self._receivers(payload):
            if receiver not in known:
                raise ApiError(400, f"invalid object specification: receiver '{receiver}' does not exist")
        provenance = _provenance(headers)
        if self.alerting.policies_provenance not in (provenance, PROVENANCE_NONE):
            raise _provenance_error(self.alerting.policies_provenance, provenance)
        self.alerting.policies = {k: copy.deepcopy(v) for k, v in payload.items() if k != "provenance"}
        self.alerting.policies_provenance = provenance
        return Answer(202, {"message": "policies updated"})

    def reset_policies(self, **_: Any) -> Answer:
        self.alerting.policies = AlertingState().policies
        self.alerting.policies_provenance = PROVENANCE_NONE
        return Answer(202, copy.deepcopy(self.alerting.policies))

    def list_templates(self, **_: Any) -> list[dict[str, Any]]:
        return [copy.deepcopy(t) for _, t in sorted(self.alerting.templates.items())]

    def get_template(self, name: str, **_: Any) -> dict[str, Any]:
        if name not in self.alerting.templates:
            raise ApiError(404, "template not found", messageId="alerting.notifications.templates.notFound")
        return copy.deepcopy(self.alerting.templates[name])

    def put_template(self, name: str, payload: dict[str, Any], headers: dict[str, str], **_: Any) -> Answer:
        if not payload.get("template"):
            raise ApiError(400, "invalid object specification: template must have content")
        existing = self.alerting.templates.get(name)
        version = payload.get("version") or payload.get("resourceVersion") or ""
        if existing is not None and version and version != existing["version"]:
            raise ApiError(
                409,
                "provided version does not match current version",
                messageId="alerting.notifications.conflict",
            )
        provenance = _provenance(headers)
        if existing is not None and existing["provenance"] not in (provenance, PROVENANCE_NONE):
            raise _provenance_error(existing["provenance"], provenance)
        template = {
            "name": name,
            "template": payload["template"],
            "provenance": provenance,
            "version": secrets.token_hex(8),
        }
        self.alerting.templates[name] = template
        return Answer(202, copy.deepcopy(template))

    def delete_template(self, name: str, **_: Any) -> Answer:
        self.alerting.templates.pop(name, None)
        return Answer(204)


class _Handler(BaseHTTPRequestHandler):
    emulator: GrafanaEmulator

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        status, answer = self.emulator.handle(
            self.command,
            self.path,
            body,
            self.headers.get("Authorization"),
            {name.lower(): value for name, value in self.headers.items()},
        )
        data = b"" if answer is None else json.dumps(answer).encode()
        self.send_response(status)
        if answer is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        return


@dataclass
class RunningGrafana:
    url: str
    token: str
    emulator: GrafanaEmulator

    @property
    def state(self) -> GrafanaState:
        return self.emulator.state

    def fail_next(self, *statuses: int, on: str = "") -> None:
        """The next requests whose path contains `on` answer these statuses, in order."""
        with self.emulator.lock:
            self.emulator.state.failures.extend((status, on) for status in statuses)


@contextmanager
def serve_grafana(extra_tokens: dict[str, str] | None = None) -> Iterator[RunningGrafana]:
    """Run an emulated Grafana on 127.0.0.1 with one Admin service-account token."""
    token = "glsa_" + secrets.token_hex(16)
    emulator = GrafanaEmulator({token: "Admin", **(extra_tokens or {})})
    handler = type("GrafanaHandler", (_Handler,), {"emulator": emulator})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(SERVER_POLL_S,), name="grafana-emulator",
                              daemon=True)
    thread.start()
    try:
        yield RunningGrafana(f"http://127.0.0.1:{server.server_address[1]}", token, emulator)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
