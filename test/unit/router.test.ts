import { strict as assert } from 'node:assert';
import { BridgeError } from '../../src/core/errors';
import { MethodNotAllowed, Router, type Method } from '../../src/server/router';

const row = (method: Method, path: string) => ({ method, path });
const rows = [
  row('get', '/notebooks/cells'),
  row('get', '/notebooks/cells/:ref'),
  row('patch', '/notebooks/cells/:ref'),
  row('get', '/notebooks/cells/:ref/outputs/:output/:item'),
  row('get', '/notebooks/cells/first'),
];

function refusal(router: Router<(typeof rows)[number]>, method: string, path: string): BridgeError {
  try {
    router.match(method, path);
  } catch (error) {
    assert.ok(error instanceof BridgeError);
    return error;
  }
  assert.fail(`${method} ${path} matched`);
}

describe('router', () => {
  const router = new Router(rows);

  it('finds literal rows and binds decoded params', () => {
    assert.equal(router.match('GET', '/notebooks/cells').row, rows[0]);
    const m = router.match('GET', '/notebooks/cells/c%201/outputs/0/2');
    assert.deepEqual([m.row, m.params], [rows[3], { ref: 'c 1', output: '0', item: '2' }]);
    assert.deepEqual(router.match('PATCH', '/notebooks/cells/-1').params, { ref: '-1' });
  });

  it('prefers a literal row over a pattern that also fits', () => {
    assert.equal(router.match('GET', '/notebooks/cells/first').row, rows[4]);
  });

  it('answers HEAD from the GET row', () => {
    assert.equal(router.match('HEAD', '/notebooks/cells/x').row, rows[1]);
  });

  it('405 naming the methods the path takes', () => {
    const error = refusal(router, 'DELETE', '/notebooks/cells/x');
    assert.ok(error instanceof MethodNotAllowed);
    assert.deepEqual(error.allow, ['GET', 'PATCH']);
    assert.equal(error.detail, 'DELETE /notebooks/cells/x is not supported: use GET or PATCH');
  });

  it('404 for paths no row fits: empty params, extra segments, trailing slashes, other case', () => {
    for (const path of ['/notebooks/cells/', '/notebooks/cells/x/y', '/notebooks/cells//outputs/0/1', '/Notebooks/cells'])
      assert.equal(refusal(router, 'GET', path).status, 404, path);
  });

  it('400 for a param that is not valid percent-encoding', () => {
    const error = refusal(router, 'GET', '/notebooks/cells/%ZZ');
    assert.deepEqual([error.status, error.detail], [400, "Malformed percent-encoding in the path segment '%ZZ'"]);
  });
});
