"""Protobuf modules generated from k8s.io/api and k8s.io/apimachinery's .proto files, at the
versions tools/go/kube/go.mod pins. Do not edit: regenerate with `python -m tools.k8sproto`
(tests/controller/test_observe_proto.py checks they match)."""
