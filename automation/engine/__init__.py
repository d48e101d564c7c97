"""Running stacks: the StackRunner protocol, the Automation API driver, the mock engine."""
