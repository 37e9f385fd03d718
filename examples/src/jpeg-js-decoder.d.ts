/** jpeg-js's decoder alone (its index also pulls in the encoder, which the model does not need). */
declare module 'jpeg-js/lib/decoder.js' {
  import type { decode } from 'jpeg-js';
  const decodeJpeg: typeof decode;
  export default decodeJpeg;
}
