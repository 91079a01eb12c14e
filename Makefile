# Samvad developer tasks. Local Neo4j: see docs/neo4j.md.
.PHONY: neo4j-start neo4j-stop neo4j-status

NEO4J_SH := scripts/neo4j.sh

neo4j-start:
	@$(NEO4J_SH) start

neo4j-stop:
	@$(NEO4J_SH) stop

neo4j-status:
	@$(NEO4J_SH) status
