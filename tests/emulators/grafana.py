"""A stateful emulator of the Grafana HTTP API parts crashreg's provisioning uses.

Served over real HTTP on 127.0.0.1 (ephemeral port, background thread) so the real
`grafana-client` library talks to it. Behaviour follows Grafana 11's documented API and
its source (pkg/services/dashboards, pkg/api): dashboard versions increment on every save,
412 `version-mismatch` / `name-exists` without `overwrite`, 409 on duplicate data source
name or uid, write-only `secureJsonData` (only `secureJsonFields` is ever returned),
folder versions with 412 on mismatch, search, annotations with tag and time filters, and
401 for anything but a known service-account token.
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

from tests.conftest import SERVER_POLL_S

GRAFANA_VERSION = "11.3.1"
UID_PATTERN = re.compile(r"^[a-zA-Z0-9\-_]*$")
WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


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
            )
        ]

    # -- dispatch -------------------------------------------------------------------------

    def handle(
        self, method: str, target: str, body: bytes, authorization: str | None
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
                        return 200, handler(query=query, payload=payload, **match.groupdict())
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


class _Handler(BaseHTTPRequestHandler):
    emulator: GrafanaEmulator

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        status, answer = self.emulator.handle(
            self.command, self.path, body, self.headers.get("Authorization")
        )
        data = json.dumps(answer).encode()
        self.send_response(status)
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
