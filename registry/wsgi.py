"""Production entry point: gunicorn registry.wsgi:app (configuration from the environment)."""

from registry.app import create_app, serving_problem

problem = serving_problem()
if problem is not None:  # gunicorn's master says it first in one line (gunicorn.conf.py)
    raise RuntimeError(problem)
app = create_app()
