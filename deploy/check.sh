#!/usr/bin/env bash
# Checks the deployment files offline (no cluster, no container engine):
# - the Kubernetes manifests of built-in kinds against Kubernetes' JSON schemas, strictly (unknown
#   fields are errors), with kubernetes-validate (PyPI), installed when missing;
# - the kustomization builds (kubectl kustomize), when kubectl is installed;
# - the KEDA objects and the compose file parse, and name what they must;
# - the Prometheus alert rules load and their unit tests pass (promtool, Debian's prometheus
#   package), and the Grafana dashboard is JSON with a query on every panel.
# The Swift test DeployManifestTests checks that the files agree with the worker's configuration.
set -euo pipefail
cd "$(dirname "$0")/.."
k8s=deploy/kubernetes

command -v kubernetes-validate >/dev/null || python3 -m pip install -q kubernetes-validate
echo "== kubernetes-validate --strict (Kubernetes 1.30 schemas)"
kubernetes-validate -k 1.30.0 --strict "$k8s/namespace.yaml" "$k8s/configmap.yaml" "$k8s/secret.example.yaml" \
  "$k8s/deployment.yaml" "$k8s/pdb.yaml"

if command -v kubectl >/dev/null; then
  echo "== kubectl kustomize $k8s"
  kubectl kustomize "$k8s" > /dev/null && echo "builds: $(kubectl kustomize "$k8s" | grep -c '^kind:') objects"
else
  echo "== kubectl not installed: kustomization not built"
fi

echo "== KEDA objects and compose file"
python3 - "$k8s/keda-scaledobject.yaml" deploy/docker/compose.yaml <<'PY'
import sys, yaml
keda = list(yaml.safe_load_all(open(sys.argv[1])))
assert {d["kind"] for d in keda} == {"TriggerAuthentication", "ScaledObject"}, [d["kind"] for d in keda]
assert all(d["apiVersion"] == "keda.sh/v1alpha1" for d in keda)
auths = {d["metadata"]["name"] for d in keda if d["kind"] == "TriggerAuthentication"}
(scaled,) = [d for d in keda if d["kind"] == "ScaledObject"]
triggers = scaled["spec"]["triggers"]
# The now lane's queues over AMQP, and every app's bulk queue summed over the management API.
queues = [t["metadata"]["queueName"] for t in triggers]
assert queues == ["push.jobs", "push.jobs.due", r"^push\.jobs\.bulk\..+$"], queues
assert all(t["type"] == "rabbitmq" for t in triggers)
assert triggers[2]["metadata"]["useRegex"] == "true" and triggers[2]["metadata"]["protocol"] == "http", triggers[2]
for t in triggers:
    assert t["authenticationRef"]["name"] in auths, (t["authenticationRef"], auths)
compose = yaml.safe_load(open(sys.argv[2]))
assert compose["services"]["worker"]["deploy"]["replicas"] == 3
print("KEDA: ScaledObject on push.jobs, push.jobs.due and the bulk queues, each with its TriggerAuthentication; compose: services", ", ".join(compose["services"]))
PY
echo "== promtool check rules / test rules (deploy/prometheus)"
command -v promtool >/dev/null || { echo "promtool is missing: apt-get install prometheus (deploy/local/install-deps.sh does)" >&2; exit 1; }
promtool check rules deploy/prometheus/alerts.yaml
promtool test rules deploy/prometheus/alerts.test.yaml

echo "== Grafana dashboard"
python3 - deploy/grafana/pushworker-dashboard.json <<'PY'
import json, sys
dashboard = json.load(open(sys.argv[1]))
panels = [p for p in dashboard["panels"] if p["type"] != "row"]
assert all(p.get("targets") and all(t.get("expr") for t in p["targets"]) for p in panels), "a panel without a query"
print(f"{dashboard['title']}: {len(panels)} panels, {sum(len(p['targets']) for p in panels)} queries")
PY
echo "== all checks passed"
