"""See kvplan.simulate."""
