# taplog serve in a container: session logs on the /data volume, API, health
# and metrics on port 8787. No keys are baked in: agents send their own, and
# fallback keys come from the environment at run time (docker run -e ...).
# Inside the container taplog listens on 0.0.0.0, so it refuses to start
# without inbound tokens: pass TAPLOG_AUTH_TOKEN at run time, and give agents
# http://HOST:8787/t/<token>/v1 as their base URL.
#
#   docker build -t taplog .
#   docker run -d -p 127.0.0.1:8787:8787 -v taplog-data:/data -e TAPLOG_AUTH_TOKEN taplog
#
# BASE: any image with Python 3.11+ and its venv module as python3 (.ci/run builds on a
# Debian bookworm root made with debootstrap: podman build --build-arg BASE=…).
ARG BASE=python:3.11-slim

FROM ${BASE} AS build
# Extras to install: config/compose.yaml's fleet adds `fleet` (Redis and S3 clients).
ARG EXTRAS=fast
WORKDIR /src
COPY . .
# The install of .ci/run (a venv, pip install of this project) with uvloop, without the test extra.
RUN python3 -m venv /opt/taplog && /opt/taplog/bin/pip install --no-cache-dir ".[${EXTRAS}]"

FROM ${BASE}
ENV PATH=/opt/taplog/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=build /opt/taplog /opt/taplog
RUN useradd --system --uid 10001 --user-group --home-dir /data --no-create-home taplog \
    && mkdir /data && chown taplog:taplog /data && chmod 700 /data
USER taplog
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8787
# slim has no curl: ask /healthz with Python (TAPLOG_PORT if the port was changed).
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('TAPLOG_PORT', '8787') + '/healthz', timeout=4)"]
ENTRYPOINT ["taplog"]
CMD ["serve", "--host", "0.0.0.0", "--data-dir", "/data"]
