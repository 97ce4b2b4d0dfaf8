"""Turns a run directory into what a reviewer reads: Allure HTML, compliance summary, postmortems."""
