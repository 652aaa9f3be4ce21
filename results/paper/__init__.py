"""The papers' reference tables, shipped as package data (commbench.paper_data): see README.md here."""
