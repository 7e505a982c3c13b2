// Google's Node.js client for Cloud Storage (@google-cloud/storage) against the mock cloud's JSON API, authenticated
// by google-auth-library through the metadata server (GCE_METADATA_HOST). Run by tests/clients/run_client.py with the
// world tests/clients/storage-world.yaml: it makes a bucket's objects as files under JOBMAN_MOCK_GCS_ROOT (the mock's
// bucket root, which the worker hosts' gcsfuse mounts from) and checks what the client reads back.
//
//   node storage_client.js
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const {Storage} = require('@google-cloud/storage');

const ROOT_URL = new URL(process.env.JOBMAN_TPU_ROOT_URL);
const GCS_ROOT = process.env.JOBMAN_MOCK_GCS_ROOT;
const BUCKET = 'client-data';
// The bucket storage-world.yaml places in europe-west4; it has no directory until something writes to it.
const PLACED_BUCKET = 'placed-eu';
// The objects the test makes, by name; their order in a listing is that of their bytes ('R' < 'c' < '/' rules).
const OBJECTS = {
  'README.md': 'the data of a test run\n',
  'ckpt-index.json': '{"latest": 200}\n',
  'ckpt/step-100/params.bin': Buffer.from([0, 1, 2, 3, 255]),
  'ckpt/step-100/opt.bin': 'optimizer state',
  'ckpt/step-200/params.bin': Buffer.alloc(3000, 7),
  'logs/Zebra.txt': 'upper case sorts first\n',
  'logs/run-1.txt': 'first run\n',
  'logs/run-2.txt': 'second run\n',
};
const failures = [];

function expect(condition, message) {
  if (!condition) {
    failures.push(message);
    console.error(`FAILED: ${message}`);
  }
}

function expectEqual(actual, wanted, what) {
  const a = JSON.stringify(actual);
  const w = JSON.stringify(wanted);
  expect(a === w, `${what}: got ${a}, expected ${w}`);
}

// Names in Cloud Storage's order: by their UTF-8 bytes.
function byteOrder(names) {
  return [...names].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
}

function makeObjects() {
  for (const [name, content] of Object.entries(OBJECTS)) {
    const file = path.join(GCS_ROOT, BUCKET, ...name.split('/'));
    fs.mkdirSync(path.dirname(file), {recursive: true});
    fs.writeFileSync(file, content);
  }
}

// Every page of a listing with autoPaginate off, following nextQuery: the objects' names and the prefixes, each in
// the order the pages gave them, and the number of pages.
async function everyPage(bucket, query) {
  const names = [];
  const prefixes = [];
  let pages = 0;
  for (let next = {...query, autoPaginate: false}; next; pages++) {
    const [files, nextQuery, response] = await bucket.getFiles(next);
    expect(files.length + (response.prefixes || []).length <= query.maxResults,
           `a page of ${JSON.stringify(query)} holds more than maxResults entries`);
    names.push(...files.map(file => file.name));
    prefixes.push(...(response.prefixes || []));
    next = nextQuery;
    expect(pages < 50, `paging ${JSON.stringify(query)} does not end`);
  }
  return {names, prefixes, pages};
}

async function bucketMetadata(storage) {
  const [metadata] = await storage.bucket(BUCKET).getMetadata();
  expectEqual(metadata.kind, 'storage#bucket', 'bucket kind');
  expectEqual(metadata.name, BUCKET, 'bucket name');
  expectEqual(metadata.id, BUCKET, 'bucket id');
  // Nothing places it and no worker host mounted it: the region of the world's first zone, us-central2-b.
  expectEqual(metadata.location, 'US-CENTRAL2', 'location of a bucket nothing places');
  expectEqual(metadata.locationType, 'region', 'its locationType');
  expectEqual(metadata.storageClass, 'STANDARD', 'its storageClass');
  expect(/^\d+$/.test(metadata.projectNumber), `projectNumber ${metadata.projectNumber} is a number`);
  expect(!Number.isNaN(Date.parse(metadata.timeCreated)), `timeCreated ${metadata.timeCreated} is a time`);

  const [placed] = await storage.bucket(PLACED_BUCKET).getMetadata();
  expectEqual([placed.location, placed.locationType], ['EUROPE-WEST4', 'region'], 'the placed bucket');

  const [exists] = await storage.bucket('no-such-bucket').exists();
  expectEqual(exists, false, 'exists() of a bucket there is not');
  const missing = await storage.bucket('no-such-bucket').getMetadata().then(() => null, error => error);
  expect(missing && missing.code === 404, `getMetadata of a missing bucket fails with 404: ${missing}`);
}

async function listings(storage) {
  const bucket = storage.bucket(BUCKET);
  const names = byteOrder(Object.keys(OBJECTS));

  const [files] = await bucket.getFiles();
  expectEqual(files.map(file => file.name), names, 'getFiles(): every object in byte order');
  for (const file of files) {
    const content = Buffer.from(OBJECTS[file.name]);
    expectEqual(file.metadata.size, String(content.length), `size of ${file.name}`);
    expectEqual(file.metadata.bucket, BUCKET, `bucket of ${file.name}`);
    expectEqual(file.metadata.md5Hash, crypto.createHash('md5').update(content).digest('base64'),
                `md5Hash of ${file.name}`);
  }

  const [, , top] = await bucket.getFiles({prefix: 'ckpt/', delimiter: '/', autoPaginate: false});
  expectEqual(top.prefixes, ['ckpt/step-100/', 'ckpt/step-200/'], 'prefixes under ckpt/');
  expectEqual(top.items, undefined, 'objects directly under ckpt/');

  const [logs] = await bucket.getFiles({prefix: 'logs/'});
  expectEqual(logs.map(file => file.name), ['logs/Zebra.txt', 'logs/run-1.txt', 'logs/run-2.txt'], 'prefix logs/');

  const paged = await everyPage(bucket, {maxResults: 3});
  expectEqual(paged.names, names, 'every page of maxResults 3');
  expectEqual(paged.pages, Math.ceil(names.length / 3), 'pages of maxResults 3');

  // Objects and prefixes share the pages.
  const collapsed = await everyPage(bucket, {delimiter: '/', maxResults: 1});
  expectEqual(collapsed.names, ['README.md', 'ckpt-index.json'], 'objects at the top, a page each');
  expectEqual(collapsed.prefixes, ['ckpt/', 'logs/'], 'prefixes at the top, a page each');
  expectEqual(collapsed.pages, 4, 'pages of maxResults 1 with a delimiter');

  const [metadata] = await bucket.file('ckpt/step-200/params.bin').getMetadata();
  expectEqual(metadata.name, 'ckpt/step-200/params.bin', 'objects.get name');
  expectEqual(metadata.size, '3000', 'objects.get size');
  const [there] = await bucket.file('ckpt/step-300/params.bin').exists();
  expectEqual(there, false, 'exists() of an object there is not');
}

async function main() {
  makeObjects();
  const storage = new Storage({
    apiEndpoint: ROOT_URL.origin,
    projectId: process.env.JOBMAN_TPU_PROJECT,
    // Without it the client sends no credential to an endpoint of its own; the mock wants one, as Google does.
    useAuthWithCustomEndpoint: true,
  });
  for (const [name, part] of [['bucket metadata', bucketMetadata], ['listings', listings]]) {
    try {
      await part(storage);
    } catch (error) {
      failures.push(`${name}: ${error.stack || error}`);
      console.error(`FAILED: ${name}: ${error.stack || error}`);
    }
  }
  console.log(failures.length === 0 ? 'storage client: all checks passed' : `${failures.length} checks failed`);
  process.exitCode = failures.length === 0 ? 0 : 1;
}

main();
