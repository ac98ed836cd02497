# Security rules: Rules for every pod in a judged namespace (every namespace
# but the platform's own), with or without accelerators: images from allowed
# registries only (containers, init, ephemeral, image volumes), and the Pod
# Security Standards (https://kubernetes.io/docs/concepts/security/pod-security-standards/,
# as the pod-security-admission checks of Kubernetes 1.34 implement them):
# "baseline" for every pod, "restricted" for the workload types whose
# pod_security says so. Baseline forbids: privileged containers, capabilities
# added beyond the baseline list, host namespaces, hostPath volumes, host
# ports, Windows HostProcess, a procMount other than Default, seccomp
# Unconfined, AppArmor unconfined, custom SELinux types, users and roles,
# sysctls outside the safe set, probes and lifecycle handlers aimed at
# another host. Restricted adds: volume types beyond the restricted list,
# allowPrivilegeEscalation not false, running as root (runAsNonRoot not true,
# runAsUser 0), no RuntimeDefault or Localhost seccomp profile, capabilities
# not dropping ALL or adding anything but NET_BIND_SERVICE.
package fleetplane.admission

import data.fleetplane.config
import data.fleetplane.lib
import data.fleetplane.lib.workloads

# METADATA
# description: >-
#   Containers the container rules look at, as [where, entry, level]: every
#   container on CREATE and on UPDATE of a workload; on UPDATE of a Pod only
#   the containers that are new or changed (an image change, an ephemeral
#   container), so a running pod is never refused for what it was admitted
#   with. level is the pod security level of the template.
checked_containers contains [f.where, entry, pod_security_level(f)] if {
	mode == "full"
	judged_namespace
	some f in facts
	some entry in f.entries
}

checked_containers contains [f.where, entry, pod_security_level(f)] if {
	mode == "changes"
	judged_namespace
	some f in facts
	some entry in f.entries
	not [entry.list, entry.container] in previous_containers
}

# The checked containers that set a security context, as [where, entry,
# level, context]: most set none, so the baseline rules on contexts look at
# these only.
container_contexts contains [where, entry, level, context] if {
	some [where, entry, level] in checked_containers
	context := entry.container.securityContext
}

# The containers of the object before the update, as [list, container].
previous_containers := {[list, c] |
	spec := workloads.as_object(object.get(workloads.as_object(input.request.oldObject), "spec", {}))
	some list in ["containers", "initContainers", "ephemeralContainers"]
	some c in workloads.as_array(object.get(spec, list, []))
}

# The pod-level rules run on CREATE and on UPDATE of workloads (a Pod's
# spec cannot change those fields once it exists).
pod_rules_apply if {
	mode == "full"
	judged_namespace
}

# METADATA
# description: >-
#   The Pod Security Standards level of a template: its workload type's
#   pod_security, "baseline" without a known type; "restricted" when the
#   type's value is not a level (the stricter one; config names the field).
pod_security_level(f) := "baseline" if {
	not known_type(f)
} else := level if {
	level := config.workload_types[f.labels[lib.keys.workload_type]].pod_security
	level in {"baseline", "restricted"}
} else := "restricted"

known_type(f) if config.workload_types[f.labels[lib.keys.workload_type]]

pss(level) := sprintf("Pod Security Standards, %s", [level])

# ------------------------------------------------------------------ images

deny contains msg if {
	some [where, entry, _] in checked_containers
	image := entry.container.image
	is_string(image)
	not allowed_image(image)
	msg := image_registry_message(workloads.container_where(where, entry), image)
}

# An image volume (volumes[].image.reference) is pulled like a container's
# image, from the registry it names.
deny contains msg if {
	pod_rules_apply
	some f in facts
	some volume in f.spec.volumes
	reference := volume.image.reference
	not allowed_reference(reference)
	msg := image_registry_message(sprintf("%s volume %q", [f.where, object.get(volume, "name", "")]), reference)
}

allowed_reference(reference) if {
	is_string(reference)
	allowed_image(reference)
}

# METADATA
# description: The image-registry denial (the fast path gives the same).
image_registry_message(container, image) := sprintf(
	"image-registry: %s uses image %q from a registry that is not allowed; use an image from: %s",
	[container, image, concat(", ", config.registries)],
)

# METADATA
# description: An image is allowed when its fully qualified name starts with an allowed registry prefix.
allowed_image(image) if {
	some registry in config.registries
	startswith(qualified_image(image), registry_prefix(registry))
}

# A registry entry always ends with "/", so "nvcr.io" never admits "nvcr.io.example.com".
registry_prefix(registry) := registry if {
	endswith(registry, "/")
} else := concat("", [registry, "/"])

# METADATA
# description: >-
#   The image with its registry spelled out, as the container runtime
#   resolves it: a first path part with a dot or a colon, or "localhost", is a
#   registry; anything else comes from docker.io (library/ for single names).
qualified_image(image) := image if {
	parts := split(image, "/")
	count(parts) > 1
	registry_host(parts[0])
} else := concat("/", ["docker.io", image]) if {
	contains(image, "/")
} else := concat("/", ["docker.io", "library", image])

registry_host(part) if contains(part, ".")

registry_host(part) if contains(part, ":")

registry_host("localhost")

# ------------------------------------------------------- baseline: containers

deny contains msg if {
	some [where, entry, _, context] in container_contexts
	context.privileged == true
	msg := sprintf(
		"privileged: %s runs privileged; remove securityContext.privileged (the GPU device plugin already exposes the devices)",
		[workloads.container_where(where, entry)],
	)
}

# The capabilities a container runtime grants by default (Pod Security
# Standards, baseline: "Capabilities").
baseline_capabilities := {
	"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
	"NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}

deny contains msg if {
	some [where, entry, level, context] in container_contexts
	context.capabilities.add
	added := {c | some c in context.capabilities.add} - allowed_added_capabilities(level)
	count(added) > 0
	msg := sprintf(
		"capabilities: %s adds capabilities %s; remove them from securityContext.capabilities.add (%s allows only %s)",
		[workloads.container_where(where, entry), concat(", ", sort([sprintf("%v", [c]) | some c in added])), pss(level), concat(", ", sort(allowed_added_capabilities(level)))],
	)
}

allowed_added_capabilities("baseline") := baseline_capabilities

allowed_added_capabilities("restricted") := {"NET_BIND_SERVICE"}

deny contains msg if {
	some [where, entry, level] in checked_containers
	level == "restricted"
	not drops_all(entry.container)
	msg := sprintf(
		"capabilities: %s does not drop every capability; set securityContext.capabilities.drop: [ALL] (%s)",
		[workloads.container_where(where, entry), pss(level)],
	)
}

drops_all(c) if "ALL" in c.securityContext.capabilities.drop

deny contains msg if {
	some [where, entry, level, context] in container_contexts
	context.windowsOptions.hostProcess == true
	msg := sprintf("host-process: %s is a Windows HostProcess container; remove securityContext.windowsOptions.hostProcess (%s)", [workloads.container_where(where, entry), pss(level)])
}

deny contains msg if {
	some [where, entry, level, context] in container_contexts
	proc_mount := context.procMount
	proc_mount != "Default"
	msg := sprintf("proc-mount: %s sets procMount %v; remove it, /proc must stay masked (%s)", [workloads.container_where(where, entry), proc_mount, pss(level)])
}

deny contains msg if {
	some [where, entry, level, context] in container_contexts
	context.seccompProfile.type == "Unconfined"
	msg := sprintf("seccomp: %s runs without a seccomp profile (Unconfined); use RuntimeDefault or a Localhost profile (%s)", [workloads.container_where(where, entry), pss(level)])
}

deny contains msg if {
	some [where, entry, level, context] in container_contexts
	context.appArmorProfile.type == "Unconfined"
	msg := sprintf("apparmor: %s runs without an AppArmor profile (Unconfined); use RuntimeDefault or a Localhost profile (%s)", [workloads.container_where(where, entry), pss(level)])
}

deny contains msg if {
	some [where, entry, level, context] in container_contexts
	some problem in selinux_problems(context.seLinuxOptions)
	msg := sprintf("selinux: %s %s (%s)", [workloads.container_where(where, entry), problem, pss(level)])
}

deny contains msg if {
	some [where, entry, level] in checked_containers
	some port in entry.container.ports
	host_port := port.hostPort
	host_port != 0
	msg := sprintf("host-ports: %s binds host port %v; remove hostPort and reach the pod through a Service (%s)", [workloads.container_where(where, entry), host_port, pss(level)])
}

# Probes and lifecycle handlers run by the kubelet from the node: a host
# other than the pod's own aims them at anything the node reaches (baseline,
# Kubernetes 1.34: "Host Probes / Lifecycle Hooks").
deny contains msg if {
	some [where, entry, level] in checked_containers
	object.filter(entry.container, {"livenessProbe", "readinessProbe", "startupProbe", "lifecycle"}) != {}
	some [handler, host] in handler_hosts(entry.container)
	msg := sprintf("host-probes: %s aims %s at host %q; remove the host field, probes reach the pod itself (%s)", [workloads.container_where(where, entry), handler, host, pss(level)])
}

handler_hosts(c) := {[sprintf("%s.%s", [name, kind]), host] |
	some name in ["livenessProbe", "readinessProbe", "startupProbe"]
	some kind in ["httpGet", "tcpSocket"]
	host := c[name][kind].host
	host != ""
} | {[sprintf("lifecycle.%s.%s", [name, kind]), host] |
	some name in ["postStart", "preStop"]
	some kind in ["httpGet", "tcpSocket"]
	host := c.lifecycle[name][kind].host
	host != ""
}

# --------------------------------------------------------- baseline: pods

deny contains msg if {
	pod_rules_apply
	some f in facts

	# The list inline: as a rule it would cost OPA a rule evaluation per review.
	some field in ["hostNetwork", "hostPID", "hostIPC"]
	f.spec[field] == true
	msg := sprintf("host-namespaces: %s sets spec.%s; remove it, team workloads may not share the node's namespaces", [f.where, field])
}

deny contains msg if {
	pod_rules_apply
	some f in facts
	some volume in f.spec.volumes
	volume.hostPath
	msg := sprintf(
		"host-path: %s mounts hostPath volume %q; use a persistentVolumeClaim, emptyDir or CSI volume instead",
		[f.where, object.get(volume, "name", "")],
	)
}

deny contains msg if {
	pod_rules_apply
	some f in facts
	f.spec.securityContext.windowsOptions.hostProcess == true
	msg := sprintf("host-process: %s is a Windows HostProcess pod; remove securityContext.windowsOptions.hostProcess (%s)", [f.where, pss(pod_security_level(f))])
}

deny contains msg if {
	pod_rules_apply
	some f in facts
	f.spec.securityContext.seccompProfile.type == "Unconfined"
	msg := sprintf("seccomp: %s runs without a seccomp profile (Unconfined); use RuntimeDefault or a Localhost profile (%s)", [f.where, pss(pod_security_level(f))])
}

deny contains msg if {
	pod_rules_apply
	some f in facts
	f.spec.securityContext.appArmorProfile.type == "Unconfined"
	msg := sprintf("apparmor: %s runs without an AppArmor profile (Unconfined); use RuntimeDefault or a Localhost profile (%s)", [f.where, pss(pod_security_level(f))])
}

apparmor_annotation_prefix := "container.apparmor.security.beta.kubernetes.io/"

deny contains msg if {
	pod_rules_apply
	some f in facts
	some key, value in f.annotations
	startswith(key, apparmor_annotation_prefix)
	not apparmor_confined(value)
	msg := sprintf("apparmor: %s annotation %s is %q; use runtime/default or localhost/<profile> (%s)", [f.where, key, value, pss(pod_security_level(f))])
}

apparmor_confined("runtime/default")

apparmor_confined(value) if {
	is_string(value)
	startswith(value, "localhost/")
}

deny contains msg if {
	pod_rules_apply
	some f in facts
	some problem in selinux_problems(f.spec.securityContext.seLinuxOptions)
	msg := sprintf("selinux: %s %s (%s)", [f.where, problem, pss(pod_security_level(f))])
}

# SELinux options a pod may set (baseline: "SELinux"): a type of the
# container domain, no user, no role.
selinux_types := {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}

selinux_problems(options) := {problem |
	some field in ["type", "user", "role"]
	value := options[field]
	not selinux_allowed(field, value)
	problem := sprintf("sets seLinuxOptions.%s %q; remove it", [field, value])
}

selinux_allowed("type", value) if value in selinux_types

selinux_allowed(field, "") if field in {"user", "role"}

# The sysctls namespaced to the pod and isolated from others on the node
# (baseline: "Sysctls").
safe_sysctls := {
	"kernel.shm_rmid_forced",
	"net.ipv4.ip_local_port_range",
	"net.ipv4.ip_unprivileged_port_start",
	"net.ipv4.tcp_syncookies",
	"net.ipv4.ping_group_range",
	"net.ipv4.ip_local_reserved_ports",
	"net.ipv4.tcp_keepalive_time",
	"net.ipv4.tcp_fin_timeout",
	"net.ipv4.tcp_keepalive_intvl",
	"net.ipv4.tcp_keepalive_probes",
}

deny contains msg if {
	pod_rules_apply
	some f in facts
	some sysctl in f.spec.securityContext.sysctls
	not sysctl.name in safe_sysctls
	msg := sprintf("sysctls: %s sets sysctl %v, which reaches beyond the pod; use only %s (%s)", [f.where, object.get(sysctl, "name", null), concat(", ", sort(safe_sysctls)), pss(pod_security_level(f))])
}

# ------------------------------------------------------------- restricted

# Volume sources the restricted level allows (restricted: "Volume Types";
# image volumes since Kubernetes 1.33: their images are checked above).
restricted_volume_sources := {
	"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
	"persistentVolumeClaim", "projected", "secret", "image",
}

deny contains msg if {
	pod_rules_apply
	some f in facts
	pod_security_level(f) == "restricted"
	some volume in f.spec.volumes
	sources := object.keys(object.remove(volume, {"name"})) - restricted_volume_sources
	count(sources) > 0
	msg := sprintf("volume-types: %s volume %q is a %s volume; use one of %s (%s)", [f.where, object.get(volume, "name", ""), concat(", ", sort(sources)), concat(", ", sort(restricted_volume_sources)), pss("restricted")])
}

deny contains msg if {
	some [where, entry, level] in checked_containers
	level == "restricted"
	not entry.container.securityContext.allowPrivilegeEscalation == false
	msg := sprintf("privilege-escalation: %s may gain privileges; set securityContext.allowPrivilegeEscalation: false (%s)", [workloads.container_where(where, entry), pss(level)])
}

deny contains msg if {
	some [where, entry, level] in checked_containers
	level == "restricted"
	not runs_as_non_root(where, entry.container)
	msg := sprintf("run-as-non-root: %s may run as root; set securityContext.runAsNonRoot: true on the pod or the container (%s)", [workloads.container_where(where, entry), pss(level)])
}

# The container's own runAsNonRoot wins; else the pod's.
runs_as_non_root(_, c) if c.securityContext.runAsNonRoot == true

runs_as_non_root(where, c) if {
	not c.securityContext.runAsNonRoot == false
	some f in facts
	f.where == where
	f.spec.securityContext.runAsNonRoot == true
}

deny contains msg if {
	some [where, entry, level, context] in container_contexts
	level == "restricted"
	context.runAsUser == 0
	msg := sprintf("run-as-non-root: %s sets runAsUser 0 (root); run as another user (%s)", [workloads.container_where(where, entry), pss(level)])
}

deny contains msg if {
	pod_rules_apply
	some f in facts
	pod_security_level(f) == "restricted"
	f.spec.securityContext.runAsUser == 0
	msg := sprintf("run-as-non-root: %s sets runAsUser 0 (root); run as another user (%s)", [f.where, pss("restricted")])
}

deny contains msg if {
	some [where, entry, level] in checked_containers
	level == "restricted"
	not confined_by_seccomp(where, entry.container)
	msg := sprintf("seccomp: %s has no seccomp profile; set securityContext.seccompProfile.type: RuntimeDefault on the pod or the container (%s)", [workloads.container_where(where, entry), pss(level)])
}

confined_by_seccomp(_, c) if c.securityContext.seccompProfile.type in {"RuntimeDefault", "Localhost"}

confined_by_seccomp(where, c) if {
	not c.securityContext.seccompProfile.type
	some f in facts
	f.where == where
	f.spec.securityContext.seccompProfile.type in {"RuntimeDefault", "Localhost"}
}
