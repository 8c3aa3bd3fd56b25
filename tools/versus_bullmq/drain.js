'use strict';
// The BullMQ side of tools/versus_bullmq/run.py, written for minitask with BullMQ's
// public API only (Queue.addBulk, Worker, its 'completed' event).
//
//   node drain.js fill --port P --queue Q --jobs N --task incr|noop
//       adds N jobs in bulks of 1,000 (removed on completion, as minitask's
//       ignore_result tasks are), prints {"filled": N} and exits.
//   node drain.js work --port P --queue Q --task incr|noop --concurrency C
//       one Worker at concurrency C; prints one JSON line when it takes its first job
//       ({"first": epoch seconds}) and, every 20 ms while jobs complete, its count,
//       the time of its last completion and its CPU (process.cpuUsage) from the first
//       job taken to the last completed; runs until SIGTERM.
//
// incr: the job makes one Redis INCR on a connection of its own (as minitask's task
// does with a redis-py client of its own); noop: the job does nothing.

const { Queue, Worker } = require('bullmq');
const IORedis = require('ioredis');

function options(argv) {
  const found = { port: 6379, queue: 'versus', jobs: 20000, task: 'incr', concurrency: 1 };
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i].replace(/^--/, '');
    if (!(name in found) || i + 1 >= argv.length) {
      throw new Error(`drain.js: unknown option or no value: ${argv[i]}`);
    }
    found[name] = typeof found[name] === 'number' ? Number(argv[i + 1]) : argv[i + 1];
  }
  if (found.task !== 'incr' && found.task !== 'noop') {
    throw new Error(`drain.js: --task is incr or noop, not ${found.task}`);
  }
  return found;
}

function now() {
  return (performance.timeOrigin + performance.now()) / 1000;
}

function say(record) {
  process.stdout.write(JSON.stringify(record) + '\n');
}

async function fill(opts) {
  const queue = new Queue(opts.queue, { connection: { host: '127.0.0.1', port: opts.port } });
  const bulk = 1000;
  for (let start = 0; start < opts.jobs; start += bulk) {
    const jobs = [];
    for (let i = start; i < Math.min(opts.jobs, start + bulk); i += 1) {
      jobs.push({ name: opts.task, data: { i },
                  opts: { removeOnComplete: true, removeOnFail: true } });
    }
    await queue.addBulk(jobs);
  }
  await queue.close();
  say({ filled: opts.jobs });
}

function work(opts) {
  const connection = { host: '127.0.0.1', port: opts.port };
  const own = opts.task === 'incr' ? new IORedis(connection) : null;
  let first = null;
  let cpuAtFirst = null;
  let count = 0;
  let last = 0;
  let cpu = { user: 0, system: 0 };
  let said = -1;
  const processor = async () => {
    if (first === null) {
      first = now();
      cpuAtFirst = process.cpuUsage();
      say({ first });
    }
    if (own !== null) {
      await own.incr('versus:count');
    }
  };
  const worker = new Worker(opts.queue, processor,
                            { connection, concurrency: opts.concurrency });
  worker.on('completed', () => {
    count += 1;
    last = now();
    cpu = process.cpuUsage(cpuAtFirst);
  });
  worker.on('error', (error) => {
    process.stderr.write(`drain.js worker error: ${error}\n`);
  });
  const report = () => {
    if (count !== said) {
      said = count;
      say({ count, last, cpu_us: cpu.user + cpu.system });
    }
  };
  setInterval(report, 20);
  process.on('SIGTERM', () => {
    report();
    process.exit(0);
  });
}

async function main() {
  const [mode, ...rest] = process.argv.slice(2);
  const opts = options(rest);
  if (mode === 'fill') {
    await fill(opts);
  } else if (mode === 'work') {
    work(opts);
  } else {
    throw new Error('drain.js: the first argument is fill or work');
  }
}

main().catch((error) => {
  process.stderr.write(`${error.stack || error}\n`);
  process.exit(1);
});
