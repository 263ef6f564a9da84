// The "20-line client" (issue 14), a reference beside the start-up floor: Bun.connect to the
// running supervisor, hello and execute in one write, the value printed with Bun.write. It knows
// nothing but the happy path (no config, no session creation: the session must exist); an error reply
// (a protocol this supervisor does not speak) ends it with exit 1 rather than a wait for a result.
//   floor_client SESSION [CODE]        with AWREPL_HOME naming the state directory
import { version } from "../../package.json";

const [session = "s", code = "1+1"] = process.argv.slice(2);
const lines = `${JSON.stringify({ type: "hello", op: "hello", protocol: 4, version })}\n` +
  `${JSON.stringify({ type: "execute", id: 1, session, code })}\n`;
let buffer = "";
await new Promise<void>((done) => {
  void Bun.connect({
    unix: `${process.env.AWREPL_HOME}/supervisor.sock`,
    socket: {
      open: (socket) => void socket.write(lines),
      async data(socket, chunk) {
        buffer += new TextDecoder().decode(chunk);
        for (let nl = buffer.indexOf("\n"); nl >= 0; buffer = buffer.slice(nl + 1), nl = buffer.indexOf("\n")) {
          const reply = JSON.parse(buffer.slice(0, nl));
          if (reply.event === "error") throw new Error(`floor_client: ${reply.message}`);
          if (reply.event !== "result") continue;
          await Bun.write(Bun.stdout, `${reply.result.value}\n`);
          socket.terminate();
          done();
        }
      },
    },
  });
});
