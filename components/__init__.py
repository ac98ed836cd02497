"""fleetplane's Pulumi components and the fleet configuration they are declared from.

Declaration only: importing a module declares nothing and touches nothing.
"""
