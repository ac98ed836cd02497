"""Policy review for pull requests: the decision diff of a policy change, the policy checks, and the corpus they run on."""
