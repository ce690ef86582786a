# The default world image: where an attempt's shell, file and code tools act.
#
# BASE_IMAGE lets offline machines build it: scripts/offline-base-image.sh makes
# nodeval-base:bookworm from Debian packages, and pytest-nodeval passes that name here.
# Online users can build it straight from the default.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}

# python3 is already in the offline base; only a bare base needs the package index
# (so an offline build never reaches for the network).
RUN if ! command -v python3 >/dev/null; then \
        apt-get update \
        && apt-get install -y --no-install-recommends python3 \
        && rm -rf /var/lib/apt/lists/*; \
    fi

# Commands run as an unprivileged user whose home is the workspace; pytest-nodeval
# writes seed files owned by this uid, so keep it at 1000.
RUN useradd --uid 1000 --user-group --home-dir /workspace --no-create-home --shell /bin/sh nodeval \
    && mkdir -p /workspace \
    && chown nodeval:nodeval /workspace

ENV LANG=C.UTF-8 HOME=/workspace
USER nodeval
WORKDIR /workspace
CMD ["sleep", "infinity"]
