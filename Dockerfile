# syntax=docker/dockerfile:1
# One image for every anycloud process in a cluster (serve, operator, broker, agent): the
# `anycloud` console script, and the Pulumi CLI that the control loop drives.
#
#   docker build -t anycloud/control-plane:0.1.0 .
#   docker run --rm anycloud/control-plane:0.1.0 --version
#
# The Pulumi CLI is built from the pinned module in tools/pulumi by tools/build.py, as the
# test suite's is. Provider plugins (aws, gcp, azure-native, kubernetes, random) are fetched
# by the engine at first use into PULUMI_HOME (the chart puts it on the state volume).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG GO_IMAGE=golang:1.26-bookworm

FROM ${GO_IMAGE} AS go

# The Pulumi CLI, from tools/pulumi/go.mod (its recipe and ldflags live in tools/build.py).
FROM ${PYTHON_IMAGE} AS pulumi
COPY --from=go /usr/local/go /usr/local/go
ENV PATH=/usr/local/go/bin:$PATH ANYCLOUD_TOOLS_CACHE=/tools CGO_ENABLED=0
WORKDIR /src
COPY tools/__init__.py tools/build.py tools/
COPY tools/pulumi/ tools/pulumi/
RUN python3 tools/build.py --only pulumi && cp -L /tools/bin/pulumi /pulumi

# anycloud and its dependencies (the provider SDKs as pyproject.toml lists them), at the
# versions constraints.txt pins, in a virtualenv copied whole into the final image.
FROM ${PYTHON_IMAGE} AS venv
RUN python3 -m venv /opt/anycloud
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY automation/ automation/
COPY stacks/ stacks/
COPY components/ components/
COPY policies/ policies/
COPY data/ data/
RUN /opt/anycloud/bin/pip install --no-cache-dir -c constraints.txt .

FROM ${PYTHON_IMAGE}
# The uid the chart's securityContext runs as (runAsUser/fsGroup 10001).
RUN groupadd --gid 10001 anycloud \
 && useradd --uid 10001 --gid 10001 --home-dir /var/lib/anycloud --create-home \
      --shell /usr/sbin/nologin anycloud
COPY --from=venv /opt/anycloud /opt/anycloud
COPY --from=pulumi /pulumi /usr/local/bin/pulumi
ENV PATH=/opt/anycloud/bin:$PATH \
    ANYCLOUD_HOME=/var/lib/anycloud \
    PULUMI_SKIP_UPDATE_CHECK=true \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
WORKDIR /var/lib/anycloud
ENTRYPOINT ["anycloud"]
CMD ["--help"]
