/** The one part of jsdom the Mermaid parser check uses (a window for mermaid's DOMPurify); jsdom ships no types. */
declare module 'jsdom' {
  export class JSDOM {
    constructor(html?: string);
    readonly window: unknown;
  }
}
