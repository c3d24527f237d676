"""Production entry point: gunicorn registry.wsgi:app (configuration from the environment)."""

from registry.app import create_app

app = create_app()
