"""Models that think before they answer: the template's thinking syntax, found by probes; the
thought told apart from the answer; the budgets a request asks for."""
