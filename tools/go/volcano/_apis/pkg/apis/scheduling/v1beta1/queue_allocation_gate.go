// Added by fleetplane to volcano.sh/apis v1.14.0 at build time (tools/bootstrap.py): the one
// declaration Volcano v1.15.1 uses that v1.14.0 lacks, copied from v1.15.1's
// staging/src/volcano.sh/apis/pkg/apis/scheduling/v1beta1/labels.go. The rest of the
// difference between the two is comments, kubebuilder markers, the fake clientset and the
// informers' watch-list wrapper, which changes nothing for a real clientset.

package v1beta1

// QueueAllocationGateKey is the annotation key to opt-in to queue capacity
// gate management and the name of the scheduling gate that controls queue admission.
const QueueAllocationGateKey = GroupName + "/queue-allocation-gate"
