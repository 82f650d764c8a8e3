"""The seed scenario: an agent refactoring a small project, killed and resumed."""
