"""The API's own documents: the OpenAPI schema (``/openapi.json``, made to say what the server sends
on errors: :func:`document_errors`) and its Swagger UI page (``/docs``), both behind a token that
may read, like the API itself."""

from __future__ import annotations

import importlib.resources
from typing import Any

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from edge_server.middleware import UNPACED_PATHS
from edge_server.routes.common import READ

# Swagger UI for /docs. The page is the same for everyone and holds no secret: a token given as
# ?token= (browsers cannot send headers when opening a page) is read by the page's script in the
# browser, removed from the address bar and history, sent as "Authorization: Bearer" to fetch
# /openapi.json, and put into Swagger UI's own Authorize dialog (the spec's "bearer" scheme) for
# "Try it out". The server never writes it into HTML.
# Its assets (Swagger UI 5, which renders the OpenAPI 3.1 documents FastAPI writes) come from the
# fastapi-offline package and are served by the server itself, so the docs work on an edge box
# without internet and no third party sees who reads them.
SWAGGER_UI_ASSETS = "/docs/assets"
SWAGGER_UI_JS = f"{SWAGGER_UI_ASSETS}/swagger-ui-bundle.js"
SWAGGER_UI_CSS = f"{SWAGGER_UI_ASSETS}/swagger-ui.css"
SWAGGER_UI_ICON = f"{SWAGGER_UI_ASSETS}/favicon.png"
DOCS_HTML = f"""<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<meta name="referrer" content="no-referrer">
<link type="text/css" rel="stylesheet" href="{SWAGGER_UI_CSS}">
<link rel="icon" type="image/png" href="{SWAGGER_UI_ICON}">
<title>AirPatrol edge server API</title>
</head>
<body>
<div id="swagger-ui"></div>
<script src="{SWAGGER_UI_JS}"></script>
<script>
(function () {{
  const params = new URLSearchParams(window.location.search);
  const token = params.get("token");
  if (token !== null) {{
    params.delete("token");
    const rest = params.toString();
    window.history.replaceState(null, "", window.location.pathname + (rest ? "?" + rest : "") + window.location.hash);
  }}
  const ui = SwaggerUIBundle({{
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    layout: "BaseLayout",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
    requestInterceptor: function (req) {{
      if (token && req.url.endsWith("/openapi.json") && !req.headers.Authorization) {{
        req.headers.Authorization = "Bearer " + token;
      }}
      return req;
    }},
    onComplete: function () {{
      if (token) {{ ui.preauthorizeApiKey("bearer", token); }}
    }},
  }});
  window.ui = ui;
}})();
</script>
</body>
</html>
"""
DOCS_HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}


def document_errors(schema: dict[str, Any]) -> dict[str, Any]:
    """Make the OpenAPI document say what the server sends on errors: every error is an
    ``ErrorOut`` (FastAPI documents its own ``HTTPValidationError`` for 422, which this server
    never sends), a request with a body may get 413 from the request guard, and a read 503 from
    the read pacing while streams run."""
    error_ref = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}}
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            if method in ("get", "head") and path not in UNPACED_PATHS:
                responses.setdefault(
                    "503",
                    {
                        "description": "busy: too many API reads waiting while streams run (Retry-After)",
                        "content": error_ref,
                    },
                )
            if "422" in responses:
                responses["422"] = {
                    "description": "invalid request: the fields at fault in detail",
                    "content": error_ref,
                }
            if method in ("post", "put", "patch"):
                responses.setdefault("413", {"description": "request body too large", "content": error_ref})
                responses.setdefault(
                    "400", {"description": "unreadable body (e.g. not UTF-8)", "content": error_ref}
                )
    components = schema.get("components", {}).get("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)
    return schema


def install_docs(app: FastAPI) -> None:
    """The OpenAPI schema and its docs page, behind the token like the API itself; the page's
    Swagger UI assets (public, no secret in them) from the installed fastapi-offline."""
    assets = importlib.resources.files("fastapi_offline") / "static"
    app.mount(SWAGGER_UI_ASSETS, StaticFiles(directory=str(assets)), name="swagger-ui")
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document_errors(generate())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.get("/openapi.json", include_in_schema=False, dependencies=READ)
    async def openapi_json() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False, dependencies=READ)
    async def docs() -> HTMLResponse:
        return HTMLResponse(DOCS_HTML, headers=DOCS_HEADERS)


__all__ = ["DOCS_HTML", "document_errors", "install_docs"]
