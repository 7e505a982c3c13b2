// Google's Node.js clients for Cloud TPU against the mock cloud, authenticated by google-auth-library through the
// metadata server (GCE_METADATA_HOST). Run by tests/clients/run_client.py, which sets the JOBMAN_* variables and
// checks every response the client got against the discovery document.
//
//   node tpu_clients.js gax          @google-cloud/tpu (google-gax) over its HTTP/JSON transport
//   node tpu_clients.js googleapis   googleapis' generated tpu v2 client
'use strict';

const ROOT_URL = new URL(process.env.JOBMAN_TPU_ROOT_URL);
const PARENT = `projects/${process.env.JOBMAN_TPU_PROJECT}/locations/${process.env.JOBMAN_TPU_ZONE}`;
const SCOPES = ['https://www.googleapis.com/auth/cloud-platform'];
const DEADLINE_MS = 120000;

function expect(condition, message) {
  if (!condition) {
    throw new Error(`FAILED: ${message}`);
  }
}

// Calls probe() until it returns a true value; fails after DEADLINE_MS.
async function waitFor(what, probe) {
  const deadline = Date.now() + DEADLINE_MS;
  for (;;) {
    const value = await probe();
    if (value) {
      return value;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}`);
    }
    await new Promise(resolve => setTimeout(resolve, 50));
  }
}

// @google-cloud/tpu: a long-running call resolves when its operation is done (the client polls operations.get).
function gaxApi() {
  const {v2} = require('@google-cloud/tpu');
  const client = new v2.TpuClient({
    fallback: true, // The HTTP/1.1 REST transport, not gRPC.
    protocol: ROOT_URL.protocol.replace(':', ''),
    apiEndpoint: ROOT_URL.hostname,
    port: Number(ROOT_URL.port),
  });
  const notFound = 5; // google.rpc.Code NOT_FOUND
  const orNull = promise =>
    promise.then(([value]) => value, error => {
      if (error.code === notFound) {
        return null;
      }
      throw error;
    });
  const done = async promise => {
    const [operation] = await promise;
    const [response] = await operation.promise();
    return response;
  };
  return {
    createQueuedResource: (id, queuedResource) =>
      done(client.createQueuedResource({parent: PARENT, queuedResourceId: id, queuedResource})),
    getQueuedResource: name => orNull(client.getQueuedResource({name})),
    listQueuedResources: async () => (await client.listQueuedResources({parent: PARENT}))[0],
    deleteQueuedResource: name => done(client.deleteQueuedResource({name, force: true})),
    createNode: (id, node) => done(client.createNode({parent: PARENT, nodeId: id, node})),
    getNode: name => orNull(client.getNode({name})),
    listNodes: async () => (await client.listNodes({parent: PARENT}))[0],
    deleteNode: name => done(client.deleteNode({name})),
    listAcceleratorTypes: async () => (await client.listAcceleratorTypes({parent: PARENT}))[0],
    getAcceleratorType: async name => (await client.getAcceleratorType({name}))[0],
    listRuntimeVersions: async () => (await client.listRuntimeVersions({parent: PARENT}))[0],
    getRuntimeVersion: async name => (await client.getRuntimeVersion({name}))[0],
  };
}

// googleapis: each call is one request; long-running operations are polled here with operations.get.
function googleapisApi() {
  const {google} = require('googleapis');
  const auth = new google.auth.GoogleAuth({scopes: SCOPES});
  const tpu = google.tpu({version: 'v2', auth, rootUrl: ROOT_URL.href});
  const locations = tpu.projects.locations;
  const data = async promise => (await promise).data;
  const orNull = promise =>
    data(promise).catch(error => {
      if (error.response && error.response.status === 404) {
        return null;
      }
      throw error;
    });
  const done = async promise => {
    const operation = await data(promise);
    const finished = await waitFor(`operation ${operation.name}`, async () => {
      const polled = await data(locations.operations.get({name: operation.name}));
      return polled.done ? polled : null;
    });
    expect(!finished.error, `operation ${finished.name} failed: ${JSON.stringify(finished.error)}`);
    return finished.response;
  };
  // Every page of a list.
  const all = async (list, field) => {
    const items = [];
    let pageToken;
    do {
      const page = await data(list({parent: PARENT, pageToken}));
      items.push(...(page[field] || []));
      pageToken = page.nextPageToken;
    } while (pageToken);
    return items;
  };
  const qrs = locations.queuedResources;
  return {
    createQueuedResource: (id, requestBody) => done(qrs.create({parent: PARENT, queuedResourceId: id, requestBody})),
    getQueuedResource: name => orNull(qrs.get({name})),
    listQueuedResources: () => all(params => qrs.list(params), 'queuedResources'),
    deleteQueuedResource: name => done(qrs.delete({name, force: true})),
    createNode: (id, requestBody) => done(locations.nodes.create({parent: PARENT, nodeId: id, requestBody})),
    getNode: name => orNull(locations.nodes.get({name})),
    listNodes: () => all(params => locations.nodes.list(params), 'nodes'),
    deleteNode: name => done(locations.nodes.delete({name})),
    listAcceleratorTypes: () => all(params => locations.acceleratorTypes.list(params), 'acceleratorTypes'),
    getAcceleratorType: name => data(locations.acceleratorTypes.get({name})),
    listRuntimeVersions: () => all(params => locations.runtimeVersions.list(params), 'runtimeVersions'),
    getRuntimeVersion: name => data(locations.runtimeVersions.get({name})),
  };
}

async function queuedResourceFlow(api, prefix) {
  const id = `${prefix}-qr`;
  const nodeId = `${prefix}-qr-node`;
  const name = `${PARENT}/queuedResources/${id}`;
  const created = await api.createQueuedResource(id, {
    tpu: {
      nodeSpec: [{
        parent: PARENT,
        nodeId,
        node: {acceleratorType: 'v4-8', runtimeVersion: 'tpu-ubuntu2204-base', labels: {client: prefix}},
      }],
    },
    spot: {},
  });
  expect(created && created.name === name, `create's operation answered ${JSON.stringify(created)}`);
  await waitFor(`${id} ACTIVE`, async () => (await api.getQueuedResource(name)).state.state === 'ACTIVE');
  const listed = await api.listQueuedResources();
  expect(listed.some(q => q.name === name), `${name} is not listed`);
  const got = await api.getQueuedResource(name);
  expect(got.tpu.nodeSpec[0].nodeId === nodeId && got.spot, `get answered ${JSON.stringify(got)}`);

  const nodeName = `${PARENT}/nodes/${nodeId}`;
  const node = await api.getNode(nodeName);
  expect(node.state === 'READY' && node.acceleratorType === 'v4-8', `nodes.get answered ${JSON.stringify(node)}`);
  expect((await api.listNodes()).some(n => n.name === nodeName), `${nodeName} is not listed`);

  await api.deleteQueuedResource(name);
  await waitFor(`${id} gone`, async () => (await api.getQueuedResource(name)) === null);
}

async function catalogFlow(api) {
  const types = await api.listAcceleratorTypes();
  const v48 = `${PARENT}/acceleratorTypes/v4-8`;
  expect(types.some(t => t.name === v48), `v4-8 is not among ${JSON.stringify(types.map(t => t.name))}`);
  const type = await api.getAcceleratorType(v48);
  expect(type.type === 'v4-8', `acceleratorTypes.get answered ${JSON.stringify(type)}`);
  const runtimes = await api.listRuntimeVersions();
  expect(runtimes.length > 0, 'no runtime versions');
  const runtime = await api.getRuntimeVersion(`${PARENT}/runtimeVersions/${runtimes[0].version}`);
  expect(runtime.version === runtimes[0].version, `runtimeVersions.get answered ${JSON.stringify(runtime)}`);
}

async function nodeFlow(api, prefix) {
  const id = `${prefix}-node`;
  const name = `${PARENT}/nodes/${id}`;
  await api.createNode(id, {
    acceleratorType: 'v4-8',
    runtimeVersion: 'tpu-ubuntu2204-base',
    schedulingConfig: {spot: true},
  });
  await waitFor(`${id} READY`, async () => (await api.getNode(name)).state === 'READY');
  expect((await api.listNodes()).some(n => n.name === name), `${name} is not listed`);
  await api.deleteNode(name);
  await waitFor(`${id} gone`, async () => (await api.getNode(name)) === null);
}

async function main() {
  const which = process.argv[2];
  const makers = {gax: gaxApi, googleapis: googleapisApi};
  if (!makers[which]) {
    console.error('usage: node tpu_clients.js gax|googleapis');
    return 2;
  }
  const api = makers[which]();
  const prefix = `node-${which}`;
  let failures = 0;
  // Each part runs even when an earlier one failed, so that one run reports every method that is missing.
  for (const [part, run] of [
    ['queued resources', () => queuedResourceFlow(api, prefix)],
    ['catalog', () => catalogFlow(api)],
    ['nodes', () => nodeFlow(api, prefix)],
  ]) {
    try {
      await run();
      console.log(`${part}: ok`);
    } catch (error) {
      console.log(`${part}: FAILED: ${error && error.stack ? error.stack : error}`);
      failures += 1;
    }
  }
  return failures ? 1 : 0;
}

main().then(code => process.exit(code), error => {
  console.error(error);
  process.exit(1);
});
