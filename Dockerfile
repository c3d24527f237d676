# crashreg registry image. Release step before rolling out a new version:
#   docker run --rm -e CRASHREG_DATABASE_URL=... crashreg crashreg db upgrade
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
RUN apt-get update && apt-get install -y --no-install-recommends curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --create-home --home-dir /srv/crashreg --uid 10001 crashreg

WORKDIR /srv/crashreg
COPY pyproject.toml README.md alembic.ini gunicorn.conf.py ./
COPY registry ./registry
COPY sync ./sync
COPY dashboards ./dashboards
COPY migrations ./migrations
RUN pip install . && chown -R crashreg /srv/crashreg

USER crashreg
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
    CMD curl -fsS http://127.0.0.1:8080/healthz || exit 1
CMD ["gunicorn", "--config", "gunicorn.conf.py", "registry.wsgi:app"]
