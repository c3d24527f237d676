# crashreg registry image (docs/operations.md, "The container image"). Release step before
# rolling out a new version:
#   docker run --rm -e CRASHREG_DATABASE_URL=... crashreg crashreg db upgrade
# tests/foundation/test_image.py reads this file: it installs what the COPY lines copy as the
# RUN line does and runs every documented command as an unprivileged user.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
# The user's home is the working directory the commands run in: the SQLite default
# (crashreg.db), its Grafana reporting copy and the default dump store (crashreg-dumps) land
# there; mount a volume on it. The source tree stays root's and read-only.
RUN apt-get update && apt-get install -y --no-install-recommends curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --create-home --home-dir /var/lib/crashreg --uid 10001 crashreg

WORKDIR /srv/crashreg
COPY pyproject.toml README.md alembic.ini gunicorn.conf.py ./
COPY registry ./registry
COPY sync ./sync
COPY dashboards ./dashboards
COPY migrations ./migrations
RUN pip install .

USER crashreg
WORKDIR /var/lib/crashreg
VOLUME /var/lib/crashreg
EXPOSE 8080
# The port gunicorn binds: CRASHREG_BIND's (gunicorn.conf.py), 8080 by default.
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
    CMD port="${CRASHREG_BIND:-0.0.0.0:8080}"; curl -fsS "http://127.0.0.1:${port##*:}/healthz" || exit 1
CMD ["gunicorn", "--config", "/srv/crashreg/gunicorn.conf.py", "registry.wsgi:app"]
