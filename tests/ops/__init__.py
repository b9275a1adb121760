"""Operations tests: concurrent workers, the change feed, crashes, tampering, bad input."""
