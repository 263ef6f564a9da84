// Cells the limits tests share (limits.test.ts drives workers, cli_limits.test.ts the binary).

/** Forks up to `n` sleeping children, prints how many it got and why it stopped ("None": it got them all), and reaps them all. */
export const forkCell = (n: number) => `
import os, signal, time
kids, err = [], None
try:
    for _ in range(${n}):
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        kids.append(pid)
except OSError as e:
    err = type(e).__name__
for pid in kids:
    os.kill(pid, signal.SIGKILL)
for pid in kids:
    os.waitpid(pid, 0)
print(len(kids), err)
`;
