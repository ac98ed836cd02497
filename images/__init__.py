"""The platform's container images (the controller's, OPA's), built as OCI layouts from files:
Debian's packages, the committed lock file, the checkout. No base image, no container daemon."""
