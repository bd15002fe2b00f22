// The stacks workloads/churn.py can have (its docstring), outermost first, from <module>: the
// oracle both the consistency test and the consistency benchmark judge accepted stacks by.
export const CHURN_STACKS: ReadonlySet<string> = new Set(
  ['', ';main', ';main;a', ';main;a;b', ';main;a;b;Churner.method', ';main;a;b;Churner.method;gen', ';main;a;b;Churner.method;gen;leaf', ';main;a;c', ';main;a;c;leaf'].map(
    (s) => `<module>${s}`,
  ),
);
