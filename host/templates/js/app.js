// {{name}}: a taskhost task handler. `sh build.sh` builds plugins/{{name}}.wasm.
import { handler, progress, log, Fail } from "./sdk/taskhost.js";

export const handle = handler(async (task) => {
  const name = task.data && task.data.name;
  if (!name) throw new Fail("invalid-input", 'no "name" in the data');
  progress(50);
  log.info(`attempt ${task.attempt} of task ${task.id}`);
  console.log("printed lines land in the run's logs too");
  return { hello: name };
});
