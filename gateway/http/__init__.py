"""The HTTP surface: app factory, middleware, problems, auth, metrics, OpenAPI, reload, server."""
